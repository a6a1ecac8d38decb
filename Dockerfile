# syntax=docker/dockerfile:1
# Multi-stage: a static binary (no cgo: SQLite is pure Go) on distroless,
# running as a non-root user.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/contextd ./cmd/server \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/contextctl ./cmd/contextctl \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/contextd /out/contextctl /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /var/lib/contextd
USER 65532:65532
ENV CONTEXTD_DATA_DIR=/var/lib/contextd
# Serve other hosts: that needs API keys (CONTEXTD_API_KEYS_FILE) or CONTEXTD_AUTH=off.
ENV CONTEXTD_LISTEN_ADDR=:50051 CONTEXTD_METRICS_ADDR=:9090
EXPOSE 50051 9090
ENTRYPOINT ["/usr/local/bin/contextd"]
