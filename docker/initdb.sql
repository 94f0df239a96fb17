-- Roles, database and extensions of data-plane. Run as a superuser with psql;
-- safe to run again (every statement checks or converges).
--
-- Used by scripts/setup.sh and, through docker/initdb.sh, by the pgvector
-- image of docker-compose.yml. Passwords and the database name are psql
-- variables (owner_password, app_password, dbname) with local defaults.
--
-- data_plane_owner  owns the database and every table; runs the migrations
-- data_plane_app    the server's role: owns nothing, cannot bypass RLS
-- data_plane_query  no login; the server switches to it (SET LOCAL ROLE) to run
--                   SQL written by users, so that SQL holds only its grants
--
-- The role names are fixed: the migrations grant to them by name.

\set ON_ERROR_STOP on
\if :{?owner_password}
\else
\set owner_password data_plane_owner
\endif
\if :{?app_password}
\else
\set app_password data_plane_app
\endif
\if :{?dbname}
\else
\set dbname data_plane
\endif

-- Re-granting an existing membership is a notice, not news.
SET client_min_messages = warning;

SELECT format('CREATE ROLE %I', r)
FROM unnest(ARRAY['data_plane_owner', 'data_plane_app', 'data_plane_query']) AS r
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r)
\gexec

-- Attributes are set on every run, so a role created by hand or by an older
-- set-up converges to what the server's start-up check expects.
ALTER ROLE data_plane_owner LOGIN CREATEDB NOCREATEROLE NOSUPERUSER NOBYPASSRLS NOREPLICATION
    PASSWORD :'owner_password';
ALTER ROLE data_plane_app LOGIN NOCREATEDB NOCREATEROLE NOSUPERUSER NOBYPASSRLS NOREPLICATION
    PASSWORD :'app_password';
ALTER ROLE data_plane_query NOLOGIN NOCREATEDB NOCREATEROLE NOSUPERUSER NOBYPASSRLS NOREPLICATION
    PASSWORD NULL;

GRANT data_plane_query TO data_plane_app;
-- query_documents caps the temporary disk space of the SQL users write
-- (SET LOCAL temp_file_limit before it switches to data_plane_query). The
-- setting is a superuser's unless granted; grants on parameters are
-- cluster-wide and exist since PostgreSQL 15.
GRANT SET ON PARAMETER temp_file_limit TO data_plane_app;
-- Lets tests connected as the owner SET ROLE to the server's roles and see
-- exactly what row-level security shows them.
GRANT data_plane_app, data_plane_query TO data_plane_owner;

SELECT format('CREATE DATABASE %I OWNER data_plane_owner', :'dbname')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'dbname')
\gexec
ALTER DATABASE :"dbname" OWNER TO data_plane_owner;

-- Extensions need a superuser to create (vector is not a trusted extension).
-- template1 gets them too, so that every database created later from it, such
-- as each test's own database, has them already.
\connect template1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS pgcrypto;
-- SQL that users write (query_documents) runs as data_plane_query. set_config
-- would let it switch its role back or forge the identity that row-level
-- security reads, so only the server's own roles may call it.
REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO data_plane_app, data_plane_owner;

\connect :"dbname"
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS pgcrypto;
-- SQL that users write (query_documents) runs as data_plane_query. set_config
-- would let it switch its role back or forge the identity that row-level
-- security reads, so only the server's own roles may call it.
REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO data_plane_app, data_plane_owner;
