"""TensorBoard event files read by hand: TFRecord framing with both masked
CRC-32C checked, then the few protobuf fields of tensorflow.Event that
`smallemctl export --tensorboard` writes (cli/tfevents.h)."""
import struct


class FormatError(AssertionError):
    pass


def check(condition, message):
    if not condition:
        raise FormatError(message)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    """The TFRecord payloads of `path`, checking the framing and both CRCs."""
    data = open(path, "rb").read()
    out, at = [], 0
    while at < len(data):
        check(at + 12 <= len(data), f"{path}: truncated record header at byte {at}")
        length_bytes = data[at:at + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        check(length_crc == masked(crc32c(length_bytes)), f"{path}: bad length CRC at byte {at}")
        payload = data[at + 12:at + 12 + length]
        check(len(payload) == length and at + 16 + length <= len(data), f"{path}: truncated record")
        (data_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        check(data_crc == masked(crc32c(payload)), f"{path}: bad data CRC at byte {at}")
        out.append(payload)
        at += 16 + length
    return out


def fields(message):
    """(field number, value) of a protobuf message: ints, floats/doubles as raw bytes, bytes."""
    out, at = [], 0

    def varint():
        nonlocal at
        shift = value = 0
        while True:
            b = message[at]
            at += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value
    while at < len(message):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out.append((field, varint()))
        elif wire == 1:
            out.append((field, message[at:at + 8])); at += 8
        elif wire == 5:
            out.append((field, message[at:at + 4])); at += 4
        elif wire == 2:
            n = varint()
            out.append((field, message[at:at + n])); at += n
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    return out


def decode_events(path):
    """{tag: [(step, value)]} of scalars and {tag: text} of texts in one event file."""
    payloads = records(path)
    first = dict(fields(payloads[0]))
    check(first.get(3) == b"brain.Event:2", f"{path}: the first event is not the file version")
    scalars, texts = {}, {}
    for payload in payloads[1:]:
        event = dict(fields(payload))
        step = event.get(2, 0)
        for field, value in fields(event[5]):
            check(field == 1, "a Summary holds only values")
            v = dict(fields(value))
            tag = v[1].decode()
            if 2 in v:
                scalars.setdefault(tag, []).append((step, struct.unpack("<f", v[2])[0]))
            else:
                tensor = dict(fields(v[8]))
                check(tensor.get(1) == 7, f"{tag}: the text tensor is not DT_STRING")
                check(b"text" in v[9], f"{tag}: not the text plugin")
                texts[tag] = tensor[8].decode()
    return scalars, texts
