# A runtime image that serves a bundle: encfs-mount in the foreground as
# the container's main process (SIGTERM from `docker stop` unmounts).
#   docker build -f packaging/docker/runtime.Dockerfile -t encfs-runtime .
#   docker run --rm --device /dev/fuse --cap-add SYS_ADMIN --security-opt apparmor=unconfined \
#       -v "$PWD/assets.encfs:/bundle.encfs:ro" -v /etc/encfs/assets.key:/run/secrets/encfs.key:ro encfs-runtime
# FUSE needs the device and CAP_SYS_ADMIN (mount(2)); Docker's default
# AppArmor profile blocks mount, hence the security option on such hosts.
# The mount lives in the container's mount namespace: run the program that
# reads it in this container (extend this image), or share it with
# `-v /host/dir:/mnt/bundle:rshared` on the host side.

FROM swift:6.3-bookworm AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libfuse3-dev libssl-dev pkg-config dpkg-dev binutils git \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ARG ENCFS_GIT_COMMIT=unknown
RUN ENCFS_GIT_COMMIT="$ENCFS_GIT_COMMIT" Scripts/package-deb.sh > /tmp/deb-path && cp "$(cat /tmp/deb-path)" /encfs-tools.deb

FROM debian:bookworm-slim
COPY --from=build /encfs-tools.deb /tmp/encfs-tools.deb
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends /tmp/encfs-tools.deb \
    && rm -rf /var/lib/apt/lists/* /tmp/encfs-tools.deb \
    && mkdir -p /mnt/bundle
# The key comes from a mounted secret file, never from the image or argv.
ENTRYPOINT ["encfs-mount", "/bundle.encfs", "/mnt/bundle", "--key-file", "/run/secrets/encfs.key", "-f"]
