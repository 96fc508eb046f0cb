#!/usr/bin/env python3
# grpc_health_probe.py: exits 0 when tandemd's grpc.health.v1 Check answers SERVING (Docker HEALTHCHECK).
#
# Usage: grpc_health_probe.py [HOST:PORT] [SERVICE]   (default 127.0.0.1:50051, service "")
# Needs only python3-grpcio: the two messages are encoded by hand (grpc/health/v1/health.proto:
# HealthCheckRequest{string service = 1}, HealthCheckResponse{ServingStatus status = 1},
# SERVING = 1). Exit codes: 0 SERVING, 1 any other status or an RPC error, 2 bad usage.
import sys

import grpc

_SERVING = 1
_TIMEOUT_SECONDS = 5


def encode_request(service: str) -> bytes:
    data = service.encode("utf-8")
    if not data:
        return b""
    if len(data) > 127:
        raise ValueError("service name too long for this probe")
    return b"\x0a" + bytes([len(data)]) + data


def decode_status(payload: bytes) -> int:
    # Field 1, varint (tag 0x08). Absent = 0 = UNKNOWN. Other fields are skipped by not reading
    # past the first varint field; the response has only this one.
    i = 0
    while i < len(payload):
        tag = payload[i]
        i += 1
        if tag != 0x08:
            return 0
        value, shift = 0, 0
        while i < len(payload):
            byte = payload[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        return value
    return 0


def main(argv: list) -> int:
    if len(argv) > 3:
        print("usage: grpc_health_probe.py [HOST:PORT] [SERVICE]", file=sys.stderr)
        return 2
    target = argv[1] if len(argv) > 1 else "127.0.0.1:50051"
    service = argv[2] if len(argv) > 2 else ""
    with grpc.insecure_channel(target) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        try:
            payload = check(encode_request(service), timeout=_TIMEOUT_SECONDS)
        except grpc.RpcError as error:
            print(f"{target}: {error.code().name}: {error.details()}", file=sys.stderr)
            return 1
    status = decode_status(payload)
    if status != _SERVING:
        print(f"{target}: status {status} (not SERVING)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
