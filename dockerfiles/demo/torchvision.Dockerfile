FROM pytorch-base AS build
ARG PYTORCH_ROCM_ARCH
ARG ROCM_VERSION
COPY --from=torch /wheels/ /deps/
RUN python3 /usr/local/bin/demo_build.py install /deps/torch-*.whl
RUN python3 /usr/local/bin/demo_build.py wheel --name torchvision --version "0.30.0+rocm${ROCM_VERSION}" \
      --arches "${PYTORCH_ROCM_ARCH}" --requires "torch==2.15.0a0+git31a77fc.rocm${ROCM_VERSION}" --out /dist

FROM scratch AS wheels
COPY --from=build /dist/*.whl /wheels/
