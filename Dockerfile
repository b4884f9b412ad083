# syntax=docker/dockerfile:1
#
# sessionlog: one image for every role; the command picks it (`worker`, `serve`, `sessions …`).
#
#   docker build -t sessionlog .
#   docker run --rm sessionlog --help
#
# The runtime image holds the compiled JavaScript (dist/src), the production dependencies and
# the `sessionlog` bin, and runs as the unprivileged `node` user. Session data lives in /data
# (SESSIONLOG_STORE=sqlite:/data/sessionlog.db): mount a volume there.

ARG NODE_IMAGE=node:24-slim

# ---------------------------------------------------------------------------------------------
# build: compile TypeScript, then drop the dev dependencies. better-sqlite3 builds its native
# addon from source when no prebuilt binary can be fetched, so the toolchain node-gyp needs is here.
FROM ${NODE_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# npm ci's postinstall step (scripts/native-modules.mjs) checks better-sqlite3 against this Node.
COPY scripts ./scripts
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund

# ---------------------------------------------------------------------------------------------
# runtime: no compiler, no sources, no dev dependencies. Without src/ next to it the bin runs
# the built CLI in dist/ (bin/sessionlog.mjs only falls back to tsx in a source checkout).
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    SESSIONLOG_STORE=sqlite:/data/sessionlog.db
WORKDIR /app
# Everything under /app stays owned by root: the `node` user can read the app, not change it.
COPY package.json package-lock.json ./
COPY bin ./bin
COPY converters ./converters
COPY scripts ./scripts
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
# The HTTP gateway (`serve`); a worker's operations listener (/healthz, /readyz) when
# SESSIONLOG_METRICS_PORT is set.
EXPOSE 8787 9464
ENTRYPOINT ["node", "bin/sessionlog.mjs"]
CMD ["--help"]
