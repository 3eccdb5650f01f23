/*
 * mhd_errors: libmicrohttpd's own error answers, in kiln's error shape.
 *
 * libmicrohttpd refuses some requests before kilnd's handler sees them (a
 * header line that is not "Name: value", a request line and headers over
 * the connection's memory, an HTTP/1.1 request without Host, a malformed
 * chunk, an HTTP version it does not speak) and answers them itself with
 * a fixed HTML page. It has no option to change that page (0.9.75 to
 * 0.9.77). It builds it with MHD_create_response_from_buffer and queues
 * it with MHD_queue_response, both called through its PLT, so kilnd
 * defines those two (mhd_errors.c): the executable's definition comes
 * first in the dynamic linker's global scope and takes the library's
 * calls. Every call of MHD_queue_response that reaches kilnd's definition
 * is therefore the library's own error answer (kilnd queues its answers
 * through mhd_queue, the library's function); it is replaced by
 * {"error":{"code":..,"message":..}} with the same status.
 *
 * A Content-Length libmicrohttpd cannot parse (not a number, or over
 * 2^64) is the exception: 0.9.75 writes the status line and headers of
 * that answer twice (parse_connection_headers's error path falls through
 * into the ordinary reply), so any body after them would be read as
 * garbage. Such a connection is closed without an answer instead.
 *
 * tests/e2e/60-kilnd-api.sh mhd_error_* sends each of these and checks
 * the answer: if a libmicrohttpd ever calls these internally without the
 * PLT, the HTML comes back and that test fails.
 */
#ifndef KILN_API_MHD_ERRORS_H
#define KILN_API_MHD_ERRORS_H

#include <microhttpd.h>

/* libmicrohttpd's own MHD_queue_response: how kilnd queues its answers. */
enum MHD_Result mhd_queue(struct MHD_Connection *conn, unsigned int status, struct MHD_Response *resp);

#endif
