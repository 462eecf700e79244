# The image GPU tests run: pytorch-base with this arch's torch and triton
# wheels installed. The wheel images end FROM scratch (wheels only, which is
# all the fetcher reads), so they cannot run a test themselves.
FROM pytorch-base AS runtime
COPY --from=triton-wheel /wheels/ /deps/
COPY --from=torch /wheels/ /deps/
RUN python3 -m pip install --no-cache-dir /deps/triton-*.whl /deps/torch-*.whl && rm -rf /deps
