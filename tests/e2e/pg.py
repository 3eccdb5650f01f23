#!/usr/bin/env python3
"""pg.py URL SQL: a PostgreSQL client on the test's host, for a managed
database's external access (docs/databases.md "From outside").

The emulated host has no psql and no Python driver, but it has libpq
(kilnd links it for its own store): this calls libpq through ctypes, so
the connection, its SCRAM authentication and the query are PostgreSQL's
own client's. Prints each row as psql -tA does (values joined by '|'),
exits 0; a failed connection or query is its libpq message on stderr and
exit 1. PGCONNECT_TIMEOUT in the environment bounds the connect as for
psql. TLS is libpq's too: sslmode and sslrootcert in URL (the external
port takes TLS only; verify-ca with the database's certificate verifies
its server).
"""
import ctypes
import ctypes.util
import sys

CONNECTION_OK = 0
PGRES_COMMAND_OK, PGRES_TUPLES_OK = 1, 2


def main():
    if len(sys.argv) != 3:
        print("usage: pg.py URL SQL", file=sys.stderr)
        return 2
    name = ctypes.util.find_library("pq") or "libpq.so.5"
    pq = ctypes.CDLL(name)
    pq.PQconnectdb.restype = ctypes.c_void_p
    pq.PQconnectdb.argtypes = [ctypes.c_char_p]
    pq.PQstatus.argtypes = [ctypes.c_void_p]
    pq.PQerrorMessage.restype = ctypes.c_char_p
    pq.PQerrorMessage.argtypes = [ctypes.c_void_p]
    pq.PQexec.restype = ctypes.c_void_p
    pq.PQexec.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    pq.PQresultStatus.argtypes = [ctypes.c_void_p]
    pq.PQresultErrorMessage.restype = ctypes.c_char_p
    pq.PQresultErrorMessage.argtypes = [ctypes.c_void_p]
    pq.PQntuples.argtypes = [ctypes.c_void_p]
    pq.PQnfields.argtypes = [ctypes.c_void_p]
    pq.PQgetvalue.restype = ctypes.c_char_p
    pq.PQgetvalue.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    pq.PQclear.argtypes = [ctypes.c_void_p]
    pq.PQfinish.argtypes = [ctypes.c_void_p]

    conn = pq.PQconnectdb(sys.argv[1].encode())
    if not conn or pq.PQstatus(conn) != CONNECTION_OK:
        msg = pq.PQerrorMessage(conn).decode(errors="replace") if conn else "out of memory"
        print(msg.strip(), file=sys.stderr)
        if conn:
            pq.PQfinish(conn)
        return 1
    res = pq.PQexec(conn, sys.argv[2].encode())
    st = pq.PQresultStatus(res) if res else -1
    rc = 0
    if st == PGRES_TUPLES_OK:
        for i in range(pq.PQntuples(res)):
            print("|".join(pq.PQgetvalue(res, i, j).decode() for j in range(pq.PQnfields(res))))
    elif st != PGRES_COMMAND_OK:
        msg = pq.PQresultErrorMessage(res).decode(errors="replace") if res else pq.PQerrorMessage(conn).decode()
        print(msg.strip(), file=sys.stderr)
        rc = 1
    if res:
        pq.PQclear(res)
    pq.PQfinish(conn)
    return rc


if __name__ == "__main__":
    sys.exit(main())
