#!/usr/bin/env bash
# First start of the pgvector image: runs data-plane's initdb.sql with the
# passwords and database name from the container's environment. The image's
# entrypoint may source this file instead of running it, so it neither exits
# nor changes shell options.
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" --dbname postgres \
    -v owner_password="${DATA_PLANE_OWNER_PASSWORD:-data_plane_owner}" \
    -v app_password="${DATA_PLANE_APP_PASSWORD:-data_plane_app}" \
    -v dbname="${DATA_PLANE_DB_NAME:-data_plane}" \
    -f /opt/data-plane/initdb.sql
