# The gnmi-sidecar container image: a static binary on distroless, non-root.
#
#   docker build -t gnmi-sidecar:dev .
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/gnmi-sidecar:TAG --push .
#
# Needs BuildKit (Docker 23+, docker buildx) or Podman/Buildah. The journal
# lives in the volume /var/lib/gnmi-sidecar (give --journal-dir
# /var/lib/gnmi-sidecar/journal); see docs/deploy.md. GO_VERSION must be at
# least go.mod's go directive: GOTOOLCHAIN=local makes the build fail, naming
# both versions, when it is older.

# The Go release of go.mod's go directive (major.minor).
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
# Modules first: this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (no cgo), reproducible paths, no symbol tables. GOTOOLCHAIN=local: fail
# here, not download another Go, if go.mod ever needs a newer one than GO_VERSION.
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} GOTOOLCHAIN=local \
    go build -trimpath -ldflags "-s -w" -o /out/gnmi-sidecar ./cmd/gnmi-sidecar
# The journal's mount point, to be owned by the non-root user in the image:
# a new Docker volume takes the ownership of the directory it is mounted on.
RUN mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gnmi-sidecar /usr/local/bin/gnmi-sidecar
COPY --from=build --chown=65532:65532 /out/state /var/lib/gnmi-sidecar
# nonroot (65532), numeric so that Kubernetes' runAsNonRoot can check it.
USER 65532:65532
# A bare `serve` keeps its journal in ./data: under the volume too.
WORKDIR /var/lib/gnmi-sidecar
VOLUME ["/var/lib/gnmi-sidecar"]
# 9339: gNMI (--listen); 9341: Prometheus metrics (--metrics).
EXPOSE 9339 9341
ENTRYPOINT ["/usr/local/bin/gnmi-sidecar"]
CMD ["serve"]
