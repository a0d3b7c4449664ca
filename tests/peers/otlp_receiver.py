"""An OTLP/HTTP trace receiver for the telemetry tests (tests/it/telemetry.rs), decoding with
the official OpenTelemetry protobuf definitions (`opentelemetry-proto`).

usage: otlp_receiver.py PORT [CERTS_DIR]

With CERTS_DIR (made by `transport_server.py --make-certs`), it serves HTTPS with
server.pem / server-key.pem (a certificate for 127.0.0.1 signed by ca.pem).

Accepts `POST /v1/traces` (application/x-protobuf `ExportTraceServiceRequest`), answers an
empty `ExportTraceServiceResponse`, and prints one JSON line per span on stdout:
`{"service", "trace_id", "span_id", "parent_span_id", "name", "kind", "status", "attributes"}`
(ids in hex, kind and status as their enum names). Prints `listening` on stderr once ready.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    print(
                        json.dumps(
                            {
                                "service": resource.get("service.name"),
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "name": span.name,
                                "kind": trace_pb2.Span.SpanKind.Name(span.kind),
                                "status": trace_pb2.Status.StatusCode.Name(span.status.code),
                                "attributes": {a.key: value(a.value) for a in span.attributes},
                            }
                        ),
                        flush=True,
                    )
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    if len(sys.argv) > 2:
        import os
        import ssl

        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        certs = sys.argv[2]
        tls.load_cert_chain(os.path.join(certs, "server.pem"), os.path.join(certs, "server-key.pem"))
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    print("listening", file=sys.stderr, flush=True)
    server.serve_forever()
