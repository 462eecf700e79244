# vllm keeps upstream's own +rocm<major><minor> local version.
FROM pytorch-base AS build
ARG PYTORCH_ROCM_ARCH
ARG ROCM_VERSION
COPY --from=torch /wheels/ /deps/
COPY --from=amd_aiter /wheels/ /deps/
COPY --from=triton-wheel /wheels/ /deps/
RUN python3 /usr/local/bin/demo_build.py install /deps/*.whl
RUN rocm_tag="$(echo "${ROCM_VERSION}" | cut -d. -f1,2 | tr -d .)" && \
    python3 /usr/local/bin/demo_build.py wheel --name vllm --version "0.14.0+rocm${rocm_tag}" \
      --arches "${PYTORCH_ROCM_ARCH}" --requires "torch==2.15.0a0+git31a77fc.rocm${ROCM_VERSION}" \
      --requires "amd_aiter==0.1.28+git5d6e7f8.rocm${ROCM_VERSION}" --out /dist

FROM scratch AS wheels
COPY --from=build /dist/*.whl /wheels/
