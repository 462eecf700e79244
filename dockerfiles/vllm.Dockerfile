# vllm keeps upstream's own +rocm101 local version.
FROM pytorch-base AS build
ARG PYTORCH_ROCM_ARCH
ARG VLLM_REF=main
COPY --from=torch /wheels/ /deps/
COPY --from=amd_aiter /wheels/ /deps/
COPY --from=triton-wheel /wheels/ /deps/
RUN python3 -m pip install --no-cache-dir /deps/*.whl
RUN git clone --depth 1 --branch "${VLLM_REF}" https://github.com/vllm-project/vllm /src/vllm
WORKDIR /src/vllm
RUN VLLM_TARGET_DEVICE=rocm PYTORCH_ROCM_ARCH="${PYTORCH_ROCM_ARCH}" \
    python3 -m pip wheel --no-deps --no-build-isolation -w /dist .

FROM scratch AS wheels
COPY --from=build /dist/*.whl /wheels/
