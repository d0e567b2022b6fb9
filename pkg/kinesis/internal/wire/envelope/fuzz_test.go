package envelope_test

import (
	"bytes"
	"errors"
	"maps"
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/envelope"
)

// seedRecords are valid envelopes for the fuzz corpus; the 1 MiB case is left out to keep the
// fuzzer fast.
func seedRecords() [][]byte {
	var out [][]byte
	for _, tc := range roundTripCases() {
		if len(tc.msg.payload) > 4096 || len(tc.msg.metadata) > 20 {
			continue
		}
		out = append(out, envelope.Append(nil, tc.msg.uuid, tc.msg.metadata, tc.msg.payload))
	}
	return out
}

func FuzzDecode(f *testing.F) {
	for _, enc := range seedRecords() {
		f.Add(enc)
		f.Add(enc[:len(enc)-4])                                 // the body alone: valid once the fuzz function seals it
		f.Add(enc[:len(enc)-1])                                 // truncated checksum
		f.Add(enc[:len(enc)/2])                                 // truncated body
		f.Add(append(bytes.Clone(enc), 0))                      // trailing garbage
		f.Add(reseal(append(bytes.Clone(enc[:len(enc)-4]), 0))) // trailing garbage, valid checksum
		for _, i := range []int{4, 5, len(enc) / 2, len(enc) - 5, len(enc) - 1} {
			bad := bytes.Clone(enc)
			bad[i] ^= 0x01
			f.Add(bad)
			if i < len(enc)-4 {
				f.Add(reseal(bad)) // the structure, not the checksum, must catch it
			}
		}
	}
	f.Add([]byte{})
	f.Add([]byte("plain text record"))
	f.Add([]byte{0xF3, 0x89, 0x9A, 0xC2, 0x0A, 0x01, 'a'})
	f.Add([]byte{0xFF, 'W', 'K', 'E'})
	f.Add([]byte{0xFF, 'W', 'K', 'E', 2})
	f.Add(newRaw().str("id").uv(1 << 62).seal())
	f.Add(newRaw().str("id").uv(2).str("k").str("1").str("k").str("2").str("").seal())
	f.Add(newRaw().bytes(0x82, 0x00).bytes('a', 'b').uv(0).str("").seal())

	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
		// Random bytes almost never carry a valid checksum, so also decode them sealed with
		// one: that lets the fuzzer reach the success path, and the canonical-encoding checks.
		checkDecode(t, raw(bytes.Clone(data)).seal())
	})
}

// checkDecode asserts Decode's properties on any input: no panic, a well-formed error, or a
// result that re-encodes to exactly the input.
func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	orig := bytes.Clone(data)
	d, err := envelope.Decode(data)
	if !bytes.Equal(data, orig) {
		t.Fatal("Decode modified its input")
	}
	if err != nil {
		var de *envelope.DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("error %T is not a *DecodeError: %v", err, err)
		}
		if !errors.Is(err, envelope.ErrCorrupt) && !errors.Is(err, envelope.ErrUnsupportedVersion) {
			t.Fatalf("error wraps neither sentinel: %v", err)
		}
		if de.Offset < 0 || de.Offset > len(data) {
			t.Fatalf("Offset %d outside the %d-byte record: %v", de.Offset, len(data), err)
		}
		if len(err.Error()) > 512 {
			t.Fatalf("error message of %d bytes", len(err.Error()))
		}
		return
	}
	if !envelope.IsEnvelope(data) {
		t.Fatal("Decode accepted a record that IsEnvelope rejects")
	}
	if cap(d.Payload) != len(d.Payload) {
		t.Fatalf("cap(Payload) = %d, len = %d", cap(d.Payload), len(d.Payload))
	}
	if d.Metadata != nil && len(d.Metadata) == 0 {
		t.Fatal("empty non-nil Metadata")
	}
	if size := envelope.Size(d.UUID, d.Metadata, d.Payload); size != len(data) {
		t.Fatalf("Size of the decoded message = %d, record is %d bytes", size, len(data))
	}
	if again := envelope.Append(nil, d.UUID, d.Metadata, d.Payload); !bytes.Equal(again, data) {
		t.Fatalf("re-encoding differs\n got % x\nwant % x", again, data)
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add("", []byte(nil), []byte(nil))
	f.Add("4b0c7b1e-7c1f-4f8e-9a55-0a1b2c3d4e5f", []byte("name\x00order_created\x00trace\x00abc"), []byte(`{"id":1}`))
	f.Add("ünïcødé", []byte("schlüssel\x00wërt"), []byte("płatność"))
	f.Add("id", []byte("\x00\x00"), []byte{0xFF, 'W', 'K', 'E', 1})
	f.Add("id", []byte("dup\x00a\x00dup\x00b\x00odd"), bytes.Repeat([]byte{0}, 300))

	// metadata is split on NUL into alternating keys and values: a cheap way to let the fuzzer
	// choose any number of entries, including duplicate and empty keys.
	f.Fuzz(func(t *testing.T, uuid string, metadata, payload []byte) {
		var m map[string]string
		if len(metadata) > 0 {
			m = make(map[string]string)
			parts := bytes.Split(metadata, []byte{0})
			for i := 0; i < len(parts); i += 2 {
				v := ""
				if i+1 < len(parts) {
					v = string(parts[i+1])
				}
				m[string(parts[i])] = v
			}
		}

		enc := envelope.Append(nil, uuid, m, payload)
		if size := envelope.Size(uuid, m, payload); size != len(enc) {
			t.Fatalf("Size = %d, len(Append) = %d", size, len(enc))
		}
		if !envelope.IsEnvelope(enc) {
			t.Fatal("IsEnvelope(Append(...)) = false")
		}
		d, err := envelope.Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Append(...)): %v", err)
		}
		if d.UUID != uuid || !bytes.Equal(d.Payload, payload) {
			t.Fatalf("round trip changed the message: %q %q", d.UUID, d.Payload)
		}
		if len(m) == 0 && d.Metadata != nil || len(m) > 0 && !maps.Equal(d.Metadata, m) {
			t.Fatalf("Metadata = %v, want %v", d.Metadata, m)
		}
		// A different map with the same contents must give the same bytes.
		if again := envelope.Append(nil, d.UUID, maps.Clone(d.Metadata), d.Payload); !bytes.Equal(again, enc) {
			t.Fatal("equal messages encoded differently")
		}
		prefix := []byte("prefix")
		if withPrefix := envelope.Append(bytes.Clone(prefix), uuid, m, payload); !bytes.Equal(withPrefix, append(prefix, enc...)) {
			t.Fatal("Append after existing bytes differs")
		}
	})
}
