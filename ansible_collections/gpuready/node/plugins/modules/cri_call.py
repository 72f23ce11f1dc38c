#!/usr/bin/python
# Copyright: gpuready contributors
# Apache License 2.0 (see LICENSE)
"""One unary gRPC call to the container runtime's socket on the node, with the OS Python alone.

A GPU node has no grpcio, so this module speaks the few parts of HTTP/2 a unary gRPC call over a
unix socket needs (RFC 9113: the preface, SETTINGS and their acknowledgement, one HEADERS frame
of literal fields, one DATA frame; RFC 7541 literals without Huffman coding) and carries the
encoded messages to and from the controller, which encodes and decodes them with the CRI's own
generated classes.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cri_call
short_description: Make one CRI gRPC call to the container runtime's socket on the node
description:
  - Sends one unary gRPC call (an encoded request message) to the runtime's unix socket on the
    node and returns the encoded answer. It needs only the node's OS Python (3.9 and newer);
    the few parts of HTTP/2 a unary call needs are written with the standard library.
  - M(gpuready.node.containerd_runtime) uses it with
    O(gpuready.node.containerd_runtime#module:restart=true) to ask the restarted containerd, from
    the controller, whether it answers and what it loaded.
    The messages are encoded and decoded on the controller with the CRI's generated classes.
version_added: 0.1.0
author:
  - gpuready maintainers (@gpuready)
options:
  socket:
    description:
      - The runtime's unix socket on the node (C(unix://) may be written before it).
    type: str
    default: /run/containerd/containerd.sock
  method:
    description:
      - The gRPC method's path, such as C(/runtime.v1.RuntimeService/Version).
    type: str
    required: true
  request:
    description:
      - The request message, protocol-buffer encoded, then base64 encoded.
    type: str
    default: ""
  timeout:
    description:
      - Seconds to wait for the whole answer.
    type: float
    default: 10
attributes:
  check_mode:
    support: full
    description: The call is made in check mode too; a call the CRI answers changes nothing.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to show.
notes:
  - A call the runtime answers with a gRPC error (no message, only a status) fails the task saying
    so; the status itself is not decoded.
seealso:
  - module: gpuready.node.containerd_runtime
"""

EXAMPLES = r"""
- name: Ask containerd's CRI for its version (an empty VersionRequest)
  gpuready.node.cri_call:
    method: /runtime.v1.RuntimeService/Version
  register: answer
"""

RETURN = r"""
answer:
  description: The answer message, protocol-buffer encoded, then base64 encoded.
  returned: success
  type: str
  sample: CgIwLjESCmNvbnRhaW5lcmQ=
"""

import base64  # noqa: E402 (after the documentation)
import socket as sockets  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpuready.node.plugins.module_utils.specs import (  # noqa: E402
    CRI_CALL_SPEC,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# Frame types (RFC 9113, 6)
DATA = 0x0
HEADERS = 0x1
RST_STREAM = 0x3
SETTINGS = 0x4
PING = 0x6
GOAWAY = 0x7
WINDOW_UPDATE = 0x8
CONTINUATION = 0x9
# Frame flags
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
STREAM = 1
LARGEST_WINDOW = 2 ** 31 - 1
DEFAULT_WINDOW = 65535
# The most bytes of answer read (a verbose CRI Status is some tens of kilobytes).
MAX_ANSWER = 16 * 1024 * 1024


def frame(kind, flags, stream, payload=b""):
    """One HTTP/2 frame."""
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags, stream) + payload


def hpack_integer(value, prefix_bits, first=0):
    """An HPACK integer with an N-bit prefix (RFC 7541, 5.1)."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value % 128) + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def literal(name, value):
    """A header field literal without indexing, new name, no Huffman coding (RFC 7541, 6.2.2)."""
    name, value = name.encode("ascii"), value.encode("ascii")
    return (b"\x00" + hpack_integer(len(name), 7) + name
            + hpack_integer(len(value), 7) + value)


def request_bytes(method, message):
    """Everything the client sends: preface, settings, window, the call's headers and data."""
    settings = struct.pack(">HI", 0x2, 0) + struct.pack(">HI", 0x4, LARGEST_WINDOW)
    headers = b"".join(literal(name, value) for name, value in (
        (":method", "POST"), (":scheme", "http"), (":path", method),
        (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
    ))
    body = b"\x00" + struct.pack(">I", len(message)) + message
    return (PREFACE + frame(SETTINGS, 0, 0, settings)
            + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", LARGEST_WINDOW - DEFAULT_WINDOW))
            + frame(HEADERS, END_HEADERS, STREAM, headers)
            + frame(DATA, END_STREAM, STREAM, body))


class Connection:
    """A unix socket read frame by frame under one deadline."""

    def __init__(self, path, timeout):
        self.deadline = time.monotonic() + timeout
        self.sock = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buffer = b""
        self.read_total = 0

    def send(self, data):
        """Send all of ``data``."""
        self.sock.sendall(data)

    def exactly(self, count):
        """The next ``count`` bytes."""
        while len(self.buffer) < count:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no complete answer in time")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the runtime closed the connection before answering")
            self.read_total += len(chunk)
            if self.read_total > MAX_ANSWER:
                raise EOFError(f"the answer is larger than {MAX_ANSWER} bytes")
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def next_frame(self):
        """``(kind, flags, stream, payload)`` of the next frame."""
        head = self.exactly(9)
        length = struct.unpack(">I", b"\x00" + head[:3])[0]
        kind, flags, stream = struct.unpack(">BBI", head[3:])
        return kind, flags, stream & 0x7FFFFFFF, self.exactly(length)

    def close(self):
        """Close the socket."""
        self.sock.close()


def unpadded(flags, payload):
    """A DATA frame's payload without its padding."""
    if flags & PADDED:
        pad = payload[0]
        return payload[1:len(payload) - pad]
    return payload


def answer(connection):
    """The answer's data bytes on our stream (empty when the runtime answered with only a
    status: a gRPC error), answering the runtime's SETTINGS and PINGs meanwhile."""
    data = b""
    while True:
        kind, flags, stream, payload = connection.next_frame()
        if kind == SETTINGS and not flags & ACK:
            connection.send(frame(SETTINGS, ACK, 0))
        elif kind == PING and not flags & ACK:
            connection.send(frame(PING, ACK, 0, payload))
        elif kind == GOAWAY:
            raise EOFError("the runtime closed the connection (GOAWAY)")
        elif stream == STREAM and kind == RST_STREAM:
            raise EOFError("the runtime reset the call")
        elif stream == STREAM and kind == DATA:
            data += unpadded(flags, payload)
        if stream == STREAM and kind in (DATA, HEADERS, CONTINUATION) and flags & END_STREAM:
            return data


def message_of(data):
    """The gRPC message in the answer's data (5 bytes of framing, then the message)."""
    if len(data) < 5:
        return None
    compressed, length = struct.unpack(">BI", data[:5])
    if compressed:
        raise EOFError("the runtime compressed its answer")
    return data[5:5 + length]


def call(path, method, message, timeout):
    """The answer message to one unary call, or None when the runtime answered with an error."""
    connection = Connection(path, timeout)
    try:
        connection.send(request_bytes(method, message))
        return message_of(answer(connection))
    finally:
        connection.close()


def socket_path(address):
    """The filesystem path of a ``unix://`` address (or a bare path)."""
    for prefix in ("unix://", "unix:"):
        if address.startswith(prefix):
            return address[len(prefix):]
    return address


def main():
    """Make the call; fail the task with a one-line reason when the runtime cannot be asked."""
    module = AnsibleModule(argument_spec=CRI_CALL_SPEC, supports_check_mode=True)
    path = socket_path(module.params["socket"])
    try:
        request = base64.b64decode(module.params["request"], validate=True)
    except (TypeError, ValueError):
        module.fail_json(msg="request: not base64")
    try:
        found = call(path, module.params["method"], request, module.params["timeout"])
    except (OSError, EOFError) as error:
        module.fail_json(msg=f"{path}: {error}", unreachable_socket=True)
    if found is None:
        module.fail_json(msg=f"{path}: {module.params['method']} answered with a gRPC error",
                         unreachable_socket=False)
    module.exit_json(changed=False, answer=base64.b64encode(found).decode("ascii"))


if __name__ == "__main__":
    main()
