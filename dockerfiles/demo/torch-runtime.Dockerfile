# The image GPU tests run: pytorch-base with this arch's triton and torch installed.
FROM pytorch-base AS runtime
COPY --from=triton-wheel /wheels/ /deps/
COPY --from=torch /wheels/ /deps/
RUN python3 /usr/local/bin/demo_build.py install /deps/triton-*.whl /deps/torch-*.whl && rm -rf /deps && \
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
