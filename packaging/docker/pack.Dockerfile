# A CI image that packs: encfs-pack (and encfs-inspect, encfs-rekey, encfs-keygen) from
# the Debian package, on debian:bookworm-slim, without Swift.
#   docker build -f packaging/docker/pack.Dockerfile -t encfs-pack .
#   docker run --rm -v "$PWD:/work" encfs-pack /work/assets /work/assets.encfs --recipient /work/host.key.pub
# Packing needs no FUSE and no privileges.

# Stage 1: build the package from this source tree.
FROM swift:6.3-bookworm AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libfuse3-dev libssl-dev pkg-config dpkg-dev binutils git \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ARG ENCFS_GIT_COMMIT=unknown
RUN ENCFS_GIT_COMMIT="$ENCFS_GIT_COMMIT" Scripts/package-deb.sh > /tmp/deb-path && cp "$(cat /tmp/deb-path)" /encfs-tools.deb

# Stage 2: the image.
FROM debian:bookworm-slim
COPY --from=build /encfs-tools.deb /tmp/encfs-tools.deb
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends /tmp/encfs-tools.deb \
    && rm -rf /var/lib/apt/lists/* /tmp/encfs-tools.deb
RUN useradd --system --home-dir /work encfs
USER encfs
WORKDIR /work
ENTRYPOINT ["encfs-pack"]
CMD ["--help"]
