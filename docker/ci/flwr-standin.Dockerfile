# CI DEVICE, NOT WHAT USERS RUN. Stand-ins for flwr/superlink, flwr/supernode and flwr/superexec (1.41.0) for a
# CI machine that reaches no image registry: docker/e2e.sh builds them from a Debian base it bootstrapped itself
# (debootstrap --variant=minbase bookworm + python3-venv + ca-certificates, `docker import`ed as BASE) and tags
# them with the official names, so docker-compose.yml and docker/Dockerfile run unchanged. Users pull the
# official images from Docker Hub. What the stand-ins share with the official images (and what the compose
# files and docker/Dockerfile rely on): flwr==1.41.0 in a virtual environment whose `python` / `pip` come first
# on PATH, user `app` uid/gid 49999 owning it and the working directory /app, and the entrypoints
# flower-superlink / flower-supernode / flower-superexec.
#
# The build context holds the CI machine's CA bundle and a pip.conf derived from its pip configuration
# (docker/e2e.sh writes both): where HTTPS to the package index is intercepted by a proxy, pip inside the build
# fails with CERTIFICATE_VERIFY_FAILED without them. They stay in the image (/etc/pip.conf), so the app image
# built FROM the stand-in superexec installs its dependencies the same way.
ARG BASE=fedprint-ci/debian:bookworm-minbase
FROM ${BASE} AS base
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY pip.conf /etc/pip.conf
ENV PATH=/python/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    LANG=C.UTF-8
RUN echo "app:x:49999:" >> /etc/group \
    && echo "app:x:49999:49999:app:/home/app:/bin/sh" >> /etc/passwd \
    && mkdir -p /home/app /app \
    && python3 -m venv /python/venv \
    && /python/venv/bin/pip install --no-cache-dir --retries 2 --timeout 30 flwr==1.41.0 \
    && chown -R 49999:49999 /python/venv /home/app /app \
    && /python/venv/bin/python -c "import flwr; assert flwr.__version__ == '1.41.0', flwr.__version__"
LABEL org.fedprint.ci-standin="not the official Flower image: built by docker/e2e.sh for CI without a registry"
USER app
WORKDIR /app

FROM base AS superlink
ENTRYPOINT ["flower-superlink"]

FROM base AS supernode
ENTRYPOINT ["flower-supernode"]

FROM base AS superexec
ENTRYPOINT ["flower-superexec"]
