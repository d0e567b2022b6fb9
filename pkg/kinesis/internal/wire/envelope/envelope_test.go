package envelope_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/envelope"
)

type message struct {
	uuid     string
	metadata map[string]string
	payload  []byte
}

func manyKeys(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("key-%04d", i)] = strings.Repeat("v", i%7)
	}
	return m
}

func roundTripCases() []struct {
	name string
	msg  message
} {
	return []struct {
		name string
		msg  message
	}{
		{"typical", message{"4b0c7b1e-7c1f-4f8e-9a55-0a1b2c3d4e5f", map[string]string{"name": "order_created", "trace": "abc"}, []byte(`{"id":1}`)}},
		{"empty everything", message{"", nil, nil}},
		{"empty uuid", message{"", map[string]string{"k": "v"}, []byte("p")}},
		{"empty payload", message{"id", map[string]string{"k": "v"}, []byte{}}},
		{"nil metadata", message{"id", nil, []byte("p")}},
		{"empty metadata", message{"id", map[string]string{}, []byte("p")}},
		{"empty key and value", message{"id", map[string]string{"": ""}, []byte("p")}},
		{"one key", message{"id", map[string]string{"only": "one"}, []byte("p")}},
		{"unicode", message{"ünïcødé-☃-🦀", map[string]string{"schlüssel": "wërt ✓", "日本": "語"}, []byte("płatność 💸")}},
		{"binary uuid and metadata", message{"\x00\xff\xfe", map[string]string{"\x00": "\xff", "\xff\x00": "\x00\x00"}, []byte{0, 1, 2, 0xff}}},
		{"payload looks like an envelope", message{"id", nil, envelope.Append(nil, "inner", map[string]string{"a": "b"}, []byte("x"))}},
		{"uuid of 128 bytes (two-byte length)", message{strings.Repeat("u", 128), nil, []byte("p")}},
		{"many keys", message{"id", manyKeys(500), []byte("p")}},
		{"keys sharing prefixes", message{"id", map[string]string{"a": "1", "ab": "2", "abc": "3", "b": "4", "A": "5"}, []byte("p")}},
		{"large payload 1 MiB", message{"id", map[string]string{"k": "v"}, bytes.Repeat([]byte{0xA5}, 1<<20)}},
	}
}

func assertDecoded(t *testing.T, got envelope.Decoded, want message) {
	t.Helper()
	if got.UUID != want.uuid {
		t.Errorf("UUID = %q, want %q", got.UUID, want.uuid)
	}
	if len(want.metadata) == 0 {
		if got.Metadata != nil {
			t.Errorf("Metadata = %#v, want nil", got.Metadata)
		}
	} else if !maps.Equal(got.Metadata, want.metadata) {
		t.Errorf("Metadata = %v, want %v", got.Metadata, want.metadata)
	}
	if !bytes.Equal(got.Payload, want.payload) {
		t.Errorf("Payload differs: got %d bytes, want %d", len(got.Payload), len(want.payload))
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range roundTripCases() {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.msg
			enc := envelope.Append(nil, m.uuid, m.metadata, m.payload)
			if !envelope.IsEnvelope(enc) {
				t.Fatal("IsEnvelope(encoded) = false")
			}
			if size := envelope.Size(m.uuid, m.metadata, m.payload); size != len(enc) {
				t.Fatalf("Size = %d, len(Append) = %d", size, len(enc))
			}
			got, err := envelope.Decode(enc)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			assertDecoded(t, got, m)
		})
	}
}

// TestGoldenLayout pins the byte layout: a change here breaks every record already in a stream.
func TestGoldenLayout(t *testing.T) {
	enc := envelope.Append(nil, "abc", map[string]string{"z": "1", "k": "v"}, []byte("hi"))
	want := []byte{
		0xFF, 'W', 'K', 'E', // magic
		1,                // version
		3, 'a', 'b', 'c', // uuid
		2,              // metadata count
		1, 'k', 1, 'v', // sorted: k before z
		1, 'z', 1, '1',
		2, 'h', 'i', // payload
	}
	want = binary.BigEndian.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	if !bytes.Equal(enc, want) {
		t.Fatalf("encoding\n got % x\nwant % x", enc, want)
	}
	if m := envelope.Magic(); !bytes.Equal(m[:], want[:4]) {
		t.Fatalf("Magic() = % x, want % x", m, want[:4])
	}
	if envelope.Version != 1 {
		t.Fatalf("Version = %d", envelope.Version)
	}
}

func TestMagicIsACopy(t *testing.T) {
	m := envelope.Magic()
	m[0] = 'X'
	if envelope.Magic()[0] != 0xFF {
		t.Fatal("changing the result of Magic changed the magic")
	}
}

func TestAppendKeepsDst(t *testing.T) {
	prefix := []byte("already here")
	dst := append(make([]byte, 0, 4), prefix...)
	out := envelope.Append(dst, "id", map[string]string{"a": "b", "c": "d"}, []byte("payload"))
	if !bytes.HasPrefix(out, prefix) {
		t.Fatalf("Append lost the bytes already in dst: %q", out)
	}
	alone := envelope.Append(nil, "id", map[string]string{"a": "b", "c": "d"}, []byte("payload"))
	if !bytes.Equal(out[len(prefix):], alone) {
		t.Fatal("Append after a prefix encodes differently from Append(nil, ...)")
	}
	if _, err := envelope.Decode(out[len(prefix):]); err != nil {
		t.Fatalf("Decode of the appended part: %v", err)
	}
}

func TestDeterministic(t *testing.T) {
	keys := manyKeys(40)
	want := envelope.Append(nil, "id", keys, []byte("p"))
	for i := range 50 {
		// A fresh map with a different insertion history iterates in a different order.
		m := make(map[string]string)
		ks := make([]string, 0, len(keys))
		for k := range keys {
			ks = append(ks, k)
		}
		for j := range ks {
			k := ks[(j*7+i)%len(ks)]
			m[k] = keys[k]
		}
		if got := envelope.Append(nil, "id", m, []byte("p")); !bytes.Equal(got, want) {
			t.Fatalf("iteration %d: same message encoded differently", i)
		}
	}
}

func TestSizeMatchesAppend(t *testing.T) {
	// Lengths around the uvarint byte boundaries.
	for _, n := range []int{0, 1, 127, 128, 129, 16383, 16384, 16385, 1 << 20} {
		s := strings.Repeat("x", n)
		b := []byte(s)
		for _, m := range []message{
			{s, nil, nil},
			{"", map[string]string{s: ""}, nil},
			{"", map[string]string{"k": s}, nil},
			{"", nil, b},
			{s, map[string]string{s: s, "k": "v"}, b},
		} {
			if size, got := envelope.Size(m.uuid, m.metadata, m.payload), len(envelope.Append(nil, m.uuid, m.metadata, m.payload)); size != got {
				t.Fatalf("n=%d: Size = %d, len(Append) = %d", n, size, got)
			}
		}
	}
	if got := envelope.Size("", nil, nil); got != 12 {
		t.Fatalf("Size of an empty message = %d, want 12 (4 magic + 1 version + 3 lengths + 4 checksum)", got)
	}
	m := manyKeys(200)
	if size, got := envelope.Size("id", m, nil), len(envelope.Append(nil, "id", m, nil)); size != got {
		t.Fatalf("200 keys: Size = %d, len(Append) = %d", size, got)
	}
}

func TestAppendAllocations(t *testing.T) {
	payload := make([]byte, 100)
	for _, tc := range []struct {
		keys int
		max  float64
	}{{0, 0}, {1, 0}, {2, 0}, {16, 0}, {17, 1}} {
		m := manyKeys(tc.keys)
		buf := make([]byte, 0, envelope.Size("id", m, payload))
		allocs := testing.AllocsPerRun(100, func() {
			buf = envelope.Append(buf[:0], "id", m, payload)
		})
		if allocs > tc.max {
			t.Errorf("%d keys: Append allocated %v times per call with room in dst, want at most %v", tc.keys, allocs, tc.max)
		}
	}
	// Without room, Append grows dst once.
	if raceEnabled {
		t.Log("skipping the growth allocation count: the race detector adds an allocation")
		return
	}
	m := map[string]string{"a": "b", "c": "d"}
	allocs := testing.AllocsPerRun(100, func() {
		_ = envelope.Append(nil, "id", m, payload)
	})
	if allocs > 1 {
		t.Errorf("Append into nil allocated %v times, want 1", allocs)
	}
}

func TestDecodeAllocations(t *testing.T) {
	enc := envelope.Append(nil, "id", nil, make([]byte, 100))
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := envelope.Decode(enc); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("Decode without metadata allocated %v times, want at most 1 (the UUID)", allocs)
	}
}

func TestIsEnvelope(t *testing.T) {
	valid := envelope.Append(nil, "id", nil, []byte("p"))
	for _, tc := range []struct {
		name string
		data []byte
		want bool
	}{
		{"nil", nil, false},
		{"empty", []byte{}, false},
		{"one magic byte", valid[:1], false},
		{"three magic bytes", valid[:3], false},
		{"magic only", valid[:4], true},
		{"magic and version", valid[:5], true},
		{"valid", valid, true},
		{"other version", append([]byte{0xFF, 'W', 'K', 'E', 99}, valid[5:]...), true},
		{"JSON", []byte(`{"hello":"world"}`), false},
		{"UTF-8 text", []byte("ÿWKE looks close in Latin-1"), false},
		{"KPL aggregated record", []byte{0xF3, 0x89, 0x9A, 0xC2, 0x0A, 0x01, 'a'}, false},
		{"0xFF then other bytes", []byte{0xFF, 'W', 'K', 'X', 1}, false},
	} {
		if got := envelope.IsEnvelope(tc.data); got != tc.want {
			t.Errorf("%s: IsEnvelope(% x) = %v, want %v", tc.name, tc.data, got, tc.want)
		}
	}
}

// TestNoUTF8TextIsAnEnvelope checks the reason for the 0xFF lead byte: valid UTF-8 never has it.
func TestNoUTF8TextIsAnEnvelope(t *testing.T) {
	m := envelope.Magic()
	if utf8.Valid(m[:1]) || utf8.Valid(m[:]) {
		t.Fatal("the magic is valid UTF-8")
	}
	for r := rune(0); r <= utf8.MaxRune; r += 97 {
		text := []byte(string(r) + "WKE\x01")
		if envelope.IsEnvelope(text) {
			t.Fatalf("text starting with %U is taken for an envelope", r)
		}
	}
}

func TestPayloadAliasesInput(t *testing.T) {
	payload := []byte("the payload bytes")
	enc := envelope.Append(nil, "id", map[string]string{"a": "b"}, payload)
	d, err := envelope.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	start := len(enc) - 4 - len(payload)
	if &d.Payload[0] != &enc[start] {
		t.Fatal("Payload is a copy, want a sub-slice of the input")
	}
	if cap(d.Payload) != len(d.Payload) {
		t.Fatalf("cap(Payload) = %d, want len = %d", cap(d.Payload), len(d.Payload))
	}
	before := bytes.Clone(enc)
	_ = append(d.Payload, "more"...)
	if !bytes.Equal(enc, before) {
		t.Fatal("appending to Payload overwrote the record")
	}

	// Empty payload: still no capacity into the checksum.
	enc = envelope.Append(nil, "id", nil, nil)
	d, err = envelope.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Payload) != 0 || cap(d.Payload) != 0 {
		t.Fatalf("empty Payload has len %d cap %d, want 0 and 0", len(d.Payload), cap(d.Payload))
	}
}

func TestDecodedStringsDoNotAliasInput(t *testing.T) {
	enc := envelope.Append(nil, "uuid", map[string]string{"key": "value"}, []byte("p"))
	d, err := envelope.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	clear(enc)
	if d.UUID != "uuid" || d.Metadata["key"] != "value" {
		t.Fatalf("decoded strings changed with the input buffer: %q %v", d.UUID, d.Metadata)
	}
}

func corruptionSample() []byte {
	return envelope.Append(nil, "4b0c7b1e-7c1f", map[string]string{"name": "order_created", "trace": "t-1", "": "empty key"},
		[]byte(`{"id":1,"items":["a","b"]}`))
}

func TestDecodeDetectsEverySingleByteChange(t *testing.T) {
	enc := corruptionSample()
	for i := range enc {
		for x := 1; x < 256; x++ {
			bad := bytes.Clone(enc)
			bad[i] ^= byte(x)
			_, err := envelope.Decode(bad)
			if err == nil {
				t.Fatalf("byte %d xor 0x%02x: Decode succeeded", i, x)
			}
			var de *envelope.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("byte %d xor 0x%02x: error %T is not a *DecodeError", i, x, err)
			}
			if i != 4 && !errors.Is(err, envelope.ErrCorrupt) {
				t.Fatalf("byte %d xor 0x%02x: %v does not wrap ErrCorrupt", i, x, err)
			}
		}
	}
}

func TestDecodeDetectsEveryTruncation(t *testing.T) {
	for _, enc := range [][]byte{corruptionSample(), envelope.Append(nil, "", nil, nil)} {
		for n := range len(enc) {
			_, err := envelope.Decode(enc[:n])
			if !errors.Is(err, envelope.ErrCorrupt) {
				t.Fatalf("truncated to %d of %d bytes: err = %v, want ErrCorrupt", n, len(enc), err)
			}
			if n >= 5 && !strings.Contains(err.Error(), "truncated") && !strings.Contains(err.Error(), "exceeds") &&
				!strings.Contains(err.Error(), "checksum") {
				t.Errorf("truncated to %d: unhelpful error %q", n, err)
			}
		}
	}
}

func TestDecodeTruncationMessages(t *testing.T) {
	enc := corruptionSample()
	_, err := envelope.Decode(enc[:len(enc)-1])
	wantReason(t, err, envelope.ErrCorrupt, len(enc)-1, "truncated: 3 of the 4 checksum bytes present")
	_, err = envelope.Decode(enc[:4])
	wantReason(t, err, envelope.ErrCorrupt, 4, "truncated before the version byte")
	_, err = envelope.Decode(enc[:5])
	wantReason(t, err, envelope.ErrCorrupt, 5, "truncated before the uuid length")
	_, err = envelope.Decode(enc[:7])
	wantReason(t, err, envelope.ErrCorrupt, 5, "uuid length 13 exceeds the 1 bytes left")
}

func TestDecodeUnsupportedVersion(t *testing.T) {
	enc := corruptionSample()
	enc[4] = 2
	enc = reseal(enc)
	if !envelope.IsEnvelope(enc) {
		t.Fatal("IsEnvelope is false for another version")
	}
	_, err := envelope.Decode(enc)
	if errors.Is(err, envelope.ErrCorrupt) {
		t.Fatalf("unknown version reported as corrupt: %v", err)
	}
	wantReason(t, err, envelope.ErrUnsupportedVersion, 4, "version 2, this build decodes only version 1")

	// Version 0 is not valid either, and the version is checked before the (unknown) layout.
	_, err = envelope.Decode([]byte{0xFF, 'W', 'K', 'E', 0})
	wantReason(t, err, envelope.ErrUnsupportedVersion, 4, "version 0")
}

func TestDecodeNotAnEnvelope(t *testing.T) {
	for _, data := range [][]byte{nil, {}, []byte("plain text"), {0xF3, 0x89, 0x9A, 0xC2, 1, 2, 3}, {0xFF, 'W', 'K'}} {
		_, err := envelope.Decode(data)
		wantReason(t, err, envelope.ErrCorrupt, 0, "no envelope magic prefix")
	}
}

func TestDecodeTrailingGarbage(t *testing.T) {
	enc := corruptionSample()
	for _, extra := range [][]byte{{0}, []byte("garbage"), enc} {
		bad := append(bytes.Clone(enc), extra...)
		_, err := envelope.Decode(bad)
		wantReason(t, err, envelope.ErrCorrupt, len(enc), fmt.Sprintf("%d bytes of trailing data after the checksum", len(extra)))
	}
}

func TestDecodeChecksumMismatch(t *testing.T) {
	enc := corruptionSample()
	bad := bytes.Clone(enc)
	bad[len(bad)-10] ^= 0x20 // inside the payload: the structure is intact, only the checksum notices
	stored := binary.BigEndian.Uint32(enc[len(enc)-4:])
	computed := crc32.Checksum(bad[:len(bad)-4], crc32.MakeTable(crc32.Castagnoli))
	_, err := envelope.Decode(bad)
	wantReason(t, err, envelope.ErrCorrupt, len(enc)-4,
		fmt.Sprintf("checksum mismatch: stored 0x%08x, computed 0x%08x", stored, computed))
}

// raw builds a record field by field and seals it with a correct checksum, so that the
// structural checks, not the checksum, are what must reject it.
type raw []byte

func newRaw() raw { return raw{0xFF, 'W', 'K', 'E', 1} }

func (r raw) uv(v uint64) raw { return binary.AppendUvarint(r, v) }
func (r raw) bytes(b ...byte) raw {
	return append(r, b...)
}
func (r raw) str(s string) raw { return append(r.uv(uint64(len(s))), s...) }
func (r raw) seal() []byte {
	return binary.BigEndian.AppendUint32(r, crc32.Checksum(r, crc32.MakeTable(crc32.Castagnoli)))
}

func reseal(enc []byte) []byte { return raw(bytes.Clone(enc[:len(enc)-4])).seal() }

func TestDecodeHostileLengths(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   []byte
		offset int
		reason string
	}{
		{
			"uuid length past the end",
			newRaw().uv(1000).bytes('a', 'b').seal(),
			5, "uuid length 1000 exceeds the 6 bytes left",
		},
		{
			"uuid length of 2^64-1",
			newRaw().uv(^uint64(0)).seal(),
			5, "uuid length 18446744073709551615 exceeds the 4 bytes left",
		},
		{
			"uuid length overflowing 64 bits",
			newRaw().bytes(0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02).seal(),
			5, "uuid length overflows 64 bits",
		},
		{
			"uuid length of eleven continuation bytes",
			newRaw().bytes(bytes.Repeat([]byte{0x80}, 11)...).seal(),
			5, "uuid length overflows 64 bits",
		},
		{
			"non-minimal uuid length",
			newRaw().bytes(0x82, 0x00).bytes('a', 'b').uv(0).str("").seal(),
			5, "uuid length 2 is encoded in 2 bytes instead of 1",
		},
		{
			"huge metadata count",
			newRaw().str("id").uv(1 << 62).seal(),
			8, "metadata count 4611686018427387904 exceeds the at most 0 entries that fit in the 4 bytes left",
		},
		{
			"metadata count one more than fits",
			newRaw().str("id").uv(3).str("").str("").str("").str("").str("").seal(),
			8, "metadata count 3 exceeds the at most 2 entries that fit",
		},
		{
			// The second entry's key swallows the payload and its value length is read from
			// the checksum.
			"metadata count larger than the entries present",
			newRaw().str("id").uv(2).str("a").str("1").str("p").seal(),
			15, "metadata value length",
		},
		{
			"metadata key length past the end",
			newRaw().str("id").uv(1).uv(500).bytes('k').str("").seal(),
			9, "metadata key length 500 exceeds the 6 bytes left",
		},
		{
			"metadata value length past the end",
			newRaw().str("id").uv(1).str("k").uv(9999).bytes('v').str("").seal(),
			11, "metadata value length 9999 exceeds the 6 bytes left",
		},
		{
			"duplicate metadata key",
			newRaw().str("id").uv(2).str("k").str("1").str("k").str("2").str("").seal(),
			13, `duplicate metadata key "k"`,
		},
		{
			"unsorted metadata keys",
			newRaw().str("id").uv(2).str("z").str("1").str("a").str("2").str("").seal(),
			13, `metadata key "a" is out of order after "z"`,
		},
		{
			"long duplicate key is quoted briefly",
			newRaw().str("id").uv(2).str(strings.Repeat("k", 5000)).str("").str(strings.Repeat("k", 5000)).str("").str("").seal(),
			5012, `duplicate metadata key "` + strings.Repeat("k", 32) + `"… (5000 bytes)`,
		},
		{
			"long key is cut between characters",
			newRaw().str("id").uv(2).str("z").str("").str("a" + strings.Repeat("日", 20)).str("").str("").seal(),
			12, `metadata key "a` + strings.Repeat("日", 10) + `"… (61 bytes) is out of order after "z"`,
		},
		{
			"unprintable keys keep the message short",
			newRaw().str("id").uv(2).str(strings.Repeat("\x7f", 1000)).str("").str(strings.Repeat("\x01", 1000)).str("").str("").seal(),
			1012, `metadata key "` + strings.Repeat(`\x01`, 32) + `"… (1000 bytes) is out of order after "` + strings.Repeat(`\x7f`, 32) + `"… (1000 bytes)`,
		},
		{
			"payload length past the end",
			newRaw().str("id").uv(0).uv(100).bytes('p').seal(),
			9, "payload length 100 exceeds the 5 bytes left",
		},
		{
			"payload length swallows the checksum",
			newRaw().str("id").uv(0).uv(4).seal(),
			-1, "truncated: 0 of the 4 checksum bytes present",
		},
		{
			"truncated inside a length",
			newRaw().str("id").uv(0).bytes(0x80),
			10, "truncated inside the payload length",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := envelope.Decode(tc.data)
			offset := tc.offset
			if offset < 0 {
				offset = len(tc.data)
			}
			wantReason(t, err, envelope.ErrCorrupt, offset, tc.reason)
		})
	}
}

func TestDecodeErrorMessage(t *testing.T) {
	data := newRaw().str("0123456789").uv(2).str("a").str("1").str("bb").uv(9999).bytes(make([]byte, 10)...).seal()
	_, err := envelope.Decode(data)
	const want = "corrupt watermill-kinesis envelope: metadata value length 9999 exceeds the 14 bytes left at offset 24"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
	var de *envelope.DecodeError
	if !errors.As(err, &de) || de.Offset != 24 || de.Unwrap() != envelope.ErrCorrupt {
		t.Fatalf("DecodeError = %+v", de)
	}
	noClass := &envelope.DecodeError{Offset: 3, Reason: "why"}
	if got := noClass.Error(); got != "watermill-kinesis envelope: why at offset 3" {
		t.Fatalf("Error without Err = %q", got)
	}
}

func wantReason(t *testing.T, err, class error, offset int, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Decode succeeded, want %v containing %q", class, reason)
	}
	var de *envelope.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %T %v is not a *DecodeError", err, err)
	}
	if !errors.Is(err, class) {
		t.Errorf("error %v does not wrap %v", err, class)
	}
	if !strings.Contains(de.Reason, reason) {
		t.Errorf("Reason = %q, want it to contain %q", de.Reason, reason)
	}
	if de.Offset != offset {
		t.Errorf("Offset = %d, want %d (%v)", de.Offset, offset, err)
	}
}
