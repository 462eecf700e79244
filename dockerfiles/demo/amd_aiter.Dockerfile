# AITER JIT-compiles on first use; PREBUILD_KERNELS only buys first-inference
# latency, and level 2 is refused off CDNA before this file is ever built.
FROM pytorch-base AS build
ARG PYTORCH_ROCM_ARCH
ARG ROCM_VERSION
ARG PREBUILD_KERNELS=0
COPY --from=torch /wheels/ /deps/
RUN python3 /usr/local/bin/demo_build.py install /deps/torch-*.whl
RUN echo "PREBUILD_KERNELS=${PREBUILD_KERNELS}" && \
    python3 /usr/local/bin/demo_build.py wheel --name amd_aiter --version "0.1.28+git5d6e7f8.rocm${ROCM_VERSION}" \
      --arches "${PYTORCH_ROCM_ARCH}" --requires "torch==2.15.0a0+git31a77fc.rocm${ROCM_VERSION}" --out /dist

FROM scratch AS wheels
COPY --from=build /dist/*.whl /wheels/
