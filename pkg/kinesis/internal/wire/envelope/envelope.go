package envelope

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// Version is the envelope format version that Append writes and Decode reads. It sits in its own
// byte after the magic so that a future format can be told apart from a corrupt record: a reader
// that meets a newer version fails with ErrUnsupportedVersion instead of misreading it.
const Version = 1

const (
	magicLen    = 4
	headerLen   = magicLen + 1 // magic and version
	checksumLen = 4
	// sortBufLen is how many metadata keys Append sorts in a stack buffer before it falls back
	// to allocating one; Watermill messages rarely carry more.
	sortBufLen = 16
	// quoteMax bounds how many bytes of a key an error message quotes, so that a hostile record
	// with huge or unprintable keys cannot make its error message huge: quoting escapes a byte
	// into at most four characters, and a message quotes at most two keys.
	quoteMax = 32
)

var magic = [magicLen]byte{0xFF, 'W', 'K', 'E'}

// castagnoli is the CRC-32C table. CRC-32C rather than the IEEE polynomial because it detects
// more error patterns at the same width and has hardware support on amd64 and arm64.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Magic returns the prefix that marks a record as an envelope. It is a function returning an
// array, not a variable, so that no caller can change the prefix for everybody else.
func Magic() [magicLen]byte { return magic }

// ErrCorrupt is what every decoding failure other than an unknown version wraps, so a consumer
// can tell a damaged or hostile record (poison: no retry will help) from one written by a newer
// publisher, with errors.Is.
var ErrCorrupt = errors.New("corrupt watermill-kinesis envelope")

// ErrUnsupportedVersion is wrapped when a record carries the envelope magic but a version this
// build does not know; upgrading the consumer, not discarding the record, is the likely fix.
var ErrUnsupportedVersion = errors.New("unsupported watermill-kinesis envelope version")

// DecodeError says where and why Decode rejected a record, so that the log line for a poison
// record points at the offending byte rather than just saying "corrupt".
type DecodeError struct {
	// Offset is the byte offset in the record at which the problem was found: the start of the
	// field that is wrong, or the end of the data when it is truncated.
	Offset int
	// Reason describes the problem, for example
	// "metadata value length 9999 exceeds the 12 bytes left".
	Reason string
	// Err is ErrCorrupt or ErrUnsupportedVersion.
	Err error
}

// Error reports the class of failure, the reason and the offset in one line.
func (e *DecodeError) Error() string {
	class := "watermill-kinesis envelope"
	if e.Err != nil {
		class = e.Err.Error()
	}
	return fmt.Sprintf("%s: %s at offset %d", class, e.Reason, e.Offset)
}

// Unwrap lets errors.Is match ErrCorrupt or ErrUnsupportedVersion.
func (e *DecodeError) Unwrap() error { return e.Err }

// Decoded is a Watermill message read back from an envelope.
type Decoded struct {
	// UUID is the message UUID, byte for byte as published; it may be empty.
	UUID string
	// Metadata is nil when the message had no metadata, so callers need not allocate for the
	// common case.
	Metadata map[string]string
	// Payload aliases the record passed to Decode rather than copying it, because payloads are
	// the bulk of a record and a Kinesis client hands out buffers that are the caller's (a
	// buffer per record from the SDK's deserializer, one per answer from memlog's and from
	// package getrecords'). Its capacity equals its length, so appending to it can never overwrite the
	// checksum or any other byte of the record.
	Payload []byte
}

// Size returns the exact length of the envelope Append would write, without encoding it, so the
// publisher can reject a message over the Kinesis record limit before doing any work.
func Size(uuid string, metadata map[string]string, payload []byte) int {
	n := headerLen + fieldLen(len(uuid)) + uvarintLen(uint64(len(metadata)))
	for k, v := range metadata {
		n += fieldLen(len(k)) + fieldLen(len(v))
	}
	return n + fieldLen(len(payload)) + checksumLen
}

// Append appends the envelope of a message to dst and returns the extended slice, so that a
// publisher can reuse one buffer for many records. It grows dst at most once, and does not
// allocate at all when dst already has room and there are at most 16 metadata keys.
//
// The metadata keys are written in sorted order, so the same message always encodes to the same
// bytes whatever the map's iteration order.
func Append(dst []byte, uuid string, metadata map[string]string, payload []byte) []byte {
	dst = slices.Grow(dst, Size(uuid, metadata, payload))
	start := len(dst)
	dst = append(dst, magic[:]...)
	dst = append(dst, Version)
	dst = appendField(dst, uuid)
	dst = binary.AppendUvarint(dst, uint64(len(metadata)))
	switch len(metadata) {
	case 0:
	case 1:
		for k, v := range metadata {
			dst = appendField(dst, k)
			dst = appendField(dst, v)
		}
	default:
		var buf [sortBufLen]string
		keys := buf[:0]
		if len(metadata) > len(buf) {
			keys = make([]string, 0, len(metadata))
		}
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			dst = appendField(dst, k)
			dst = appendField(dst, metadata[k])
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(payload)))
	dst = append(dst, payload...)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// IsEnvelope reports whether data starts with the envelope magic, whatever the version and
// whether or not the rest is intact. A consumer uses it to choose between decoding a record and
// delivering it as a raw payload; a record that IsEnvelope accepts but Decode rejects is a
// damaged envelope, not a foreign record, and should be treated as poison.
func IsEnvelope(data []byte) bool {
	return len(data) >= magicLen && [magicLen]byte(data[:magicLen]) == magic
}

// Decode reads an envelope written by Append.
//
// Decode is meant for untrusted input: it never panics, checks every length against the bytes
// actually present before using it, and verifies the checksum before allocating anything, so a
// hostile or damaged record costs no more than its own size. It accepts only the canonical
// encoding (shortest varints, strictly sorted keys, nothing after the checksum). Errors are
// *DecodeError values wrapping ErrCorrupt or ErrUnsupportedVersion.
//
// The UUID and metadata strings share one allocation, and the payload is not copied: see
// Decoded.Payload.
func Decode(data []byte) (Decoded, error) {
	l, err := scan(data)
	if err != nil {
		return Decoded{}, err
	}
	body := len(data) - checksumLen
	stored := binary.BigEndian.Uint32(data[body:])
	if computed := crc32.Checksum(data[:body], castagnoli); stored != computed {
		return Decoded{}, corrupt(body, "checksum mismatch: stored 0x%08x, computed 0x%08x", stored, computed)
	}
	return l.build(data), nil
}

// layout is where scan found each part of a record. Offsets index the record.
type layout struct {
	uuidStart, uuidEnd int
	metaCount          int
	metaStart, metaEnd int // entries, after the count; metaEnd == metaStart when there are none
	payloadStart       int
	payloadEnd         int
}

// scan checks the whole structure of a record without allocating, except to report an error.
func scan(data []byte) (layout, error) {
	var l layout
	if !IsEnvelope(data) {
		return l, corrupt(0, "no envelope magic prefix")
	}
	if len(data) < headerLen {
		return l, corrupt(len(data), "truncated before the version byte")
	}
	if v := data[magicLen]; v != Version {
		return l, &DecodeError{
			Offset: magicLen,
			Reason: fmt.Sprintf("version %d, this build decodes only version %d", v, Version),
			Err:    ErrUnsupportedVersion,
		}
	}
	r := reader{data: data, off: headerLen}
	var err error
	if l.uuidStart, l.uuidEnd, err = r.field("uuid"); err != nil {
		return l, err
	}

	countAt := r.off
	count, err := r.uvarint("metadata count", "")
	if err != nil {
		return l, err
	}
	// Each entry takes at least two bytes (two empty lengths), and the payload length and the
	// checksum take at least five more, which bounds how many entries can possibly follow.
	maxCount := max(0, (r.left()-1-checksumLen)/2)
	if count > uint64(maxCount) {
		return l, corrupt(countAt, "metadata count %d exceeds the at most %d entries that fit in the %d bytes left",
			count, maxCount, r.left())
	}
	l.metaCount = int(count)
	l.metaStart = r.off
	var prev []byte
	for i := range l.metaCount {
		keyAt := r.off
		ks, ke, err := r.field("metadata key")
		if err != nil {
			return l, err
		}
		if _, _, err := r.field("metadata value"); err != nil {
			return l, err
		}
		key := data[ks:ke]
		if i > 0 {
			switch c := bytes.Compare(prev, key); {
			case c == 0:
				return l, corrupt(keyAt, "duplicate metadata key %s", quote(key))
			case c > 0:
				return l, corrupt(keyAt, "metadata key %s is out of order after %s", quote(key), quote(prev))
			}
		}
		prev = key
	}
	l.metaEnd = r.off

	if l.payloadStart, l.payloadEnd, err = r.field("payload"); err != nil {
		return l, err
	}
	switch left := r.left(); {
	case left < checksumLen:
		return l, corrupt(len(data), "truncated: %d of the %d checksum bytes present", left, checksumLen)
	case left > checksumLen:
		return l, corrupt(r.off+checksumLen, "%d bytes of trailing data after the checksum", left-checksumLen)
	}
	return l, nil
}

// build makes the Decoded of a record that scan and the checksum have accepted, so every offset
// in l is known to be in range.
func (l *layout) build(data []byte) Decoded {
	d := Decoded{Payload: data[l.payloadStart:l.payloadEnd:l.payloadEnd]}
	// One string holds the UUID and all metadata; the fields are substrings of it. That is one
	// allocation instead of one per string, and the length prefixes it also copies are tiny.
	end := l.uuidEnd
	if l.metaCount > 0 {
		end = l.metaEnd
	}
	s := string(data[l.uuidStart:end])
	d.UUID = s[:l.uuidEnd-l.uuidStart]
	if l.metaCount == 0 {
		return d
	}
	d.Metadata = make(map[string]string, l.metaCount)
	off := l.metaStart - l.uuidStart // offsets into s from here on
	next := func() string {
		n, w := binary.Uvarint(data[l.uuidStart+off:])
		start := off + w
		off = start + int(n)
		return s[start:off]
	}
	for range l.metaCount {
		k := next()
		d.Metadata[k] = next()
	}
	return d
}

// reader walks a record during scan.
type reader struct {
	data []byte
	off  int
}

func (r *reader) left() int { return len(r.data) - r.off }

// uvarint reads a shortest-form uvarint. The name of what is being read comes in two parts so
// that the success path never concatenates strings.
func (r *reader) uvarint(name, suffix string) (uint64, error) {
	v, n := binary.Uvarint(r.data[r.off:])
	switch {
	case n == 0 && r.left() == 0:
		return 0, corrupt(r.off, "truncated before the %s%s", name, suffix)
	case n == 0:
		return 0, corrupt(len(r.data), "truncated inside the %s%s", name, suffix)
	case n < 0:
		return 0, corrupt(r.off, "%s%s overflows 64 bits", name, suffix)
	case n != uvarintLen(v):
		return 0, corrupt(r.off, "%s%s %d is encoded in %d bytes instead of %d", name, suffix, v, n, uvarintLen(v))
	}
	r.off += n
	return v, nil
}

// field reads a length-prefixed field and returns where its bytes are.
func (r *reader) field(name string) (start, end int, err error) {
	at := r.off
	n, err := r.uvarint(name, " length")
	if err != nil {
		return 0, 0, err
	}
	if n > uint64(r.left()) {
		return 0, 0, corrupt(at, "%s length %d exceeds the %d bytes left", name, n, r.left())
	}
	start = r.off
	r.off += int(n)
	return start, r.off, nil
}

func corrupt(off int, format string, args ...any) error {
	return &DecodeError{Offset: off, Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}

// quote quotes at most quoteMax bytes of b for an error message, cutting between characters
// when b is UTF-8.
func quote(b []byte) string {
	if len(b) <= quoteMax {
		return fmt.Sprintf("%q", b)
	}
	cut := quoteMax
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(b[cut]); i++ {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", b[:cut], len(b))
}

func appendField(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// fieldLen is the encoded length of a length-prefixed field of n bytes.
func fieldLen(n int) int { return uvarintLen(uint64(n)) + n }

// uvarintLen is the length of the shortest uvarint encoding of x.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }
