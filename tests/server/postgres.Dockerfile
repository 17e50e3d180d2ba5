# PostgreSQL for the server's store tests, from Debian's package on the project's local
# base (no registry needed): built with host networking by tests/server/harness.py.
ARG BASE=caisson/debian-base:bookworm
FROM ${BASE}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql \
    && rm -rf /var/lib/apt/lists/*
USER postgres
RUN /usr/lib/postgresql/15/bin/initdb -D /var/lib/postgresql/data --auth=trust --username=caisson --encoding=UTF8 --locale=C \
    && echo "listen_addresses='*'" >> /var/lib/postgresql/data/postgresql.conf \
    && echo "host all all 0.0.0.0/0 trust" >> /var/lib/postgresql/data/pg_hba.conf
EXPOSE 5432
CMD ["/usr/lib/postgresql/15/bin/postgres", "-D", "/var/lib/postgresql/data", "-c", "fsync=off"]
