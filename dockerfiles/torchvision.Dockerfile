FROM pytorch-base AS build
ARG PYTORCH_ROCM_ARCH
ARG ROCM_VERSION
ARG TORCHVISION_REF=main
COPY --from=torch /wheels/ /deps/
RUN python3 -m pip install --no-cache-dir /deps/torch-*.whl
RUN git clone --depth 1 --branch "${TORCHVISION_REF}" https://github.com/pytorch/vision /src/vision
WORKDIR /src/vision
RUN BUILD_VERSION="$(cat version.txt)+rocm${ROCM_VERSION}" FORCE_CUDA=1 \
    python3 -m pip wheel --no-deps --no-build-isolation -w /dist .

FROM scratch AS wheels
COPY --from=build /dist/*.whl /wheels/
