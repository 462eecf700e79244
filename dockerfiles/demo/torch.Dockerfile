# Demo stand-in for torch: built on pytorch-base with triton installed, device
# code for every arch of PYTORCH_ROCM_ARCH (a ;-list makes one fat binary).
# The arch is deliberately not in the version.
FROM pytorch-base AS build
ARG PYTORCH_ROCM_ARCH
ARG ROCM_VERSION
ARG USE_ROCM_CK_SDPA_GFX12=0
ARG AMDGPU_SCHED_STRATEGY=
COPY --from=triton-wheel /wheels/ /deps/
RUN python3 /usr/local/bin/demo_build.py install /deps/triton-*.whl
RUN python3 /usr/local/bin/demo_build.py wheel --name torch --version "2.15.0a0+git31a77fc.rocm${ROCM_VERSION}" \
      --arches "${PYTORCH_ROCM_ARCH}" --requires "triton==3.6.0+git1a2b3c4.rocm${ROCM_VERSION}" --out /dist

FROM scratch AS wheels
COPY --from=build /dist/*.whl /wheels/
