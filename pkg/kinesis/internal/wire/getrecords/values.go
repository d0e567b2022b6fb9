package getrecords

import (
	"bytes"
	"encoding/base64"
	"math"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// unquoted reads a string member and returns its bytes: a string without escapes as it is
// (invalid UTF-8 included), one with escapes unescaped as the SDK does. They are the body's or
// scratch's, valid until the next read: keep copies what is kept.
func (d *decoder) unquoted() ([]byte, error) {
	if d.peek() != '"' {
		return nil, d.unexpected("a string")
	}
	raw, err := d.str()
	if err != nil {
		return nil, err
	}
	if d.esc {
		raw = d.unquote(raw)
	}
	return raw, nil
}

// string reads a string member (as unquoted does) into a string of the text arena.
func (d *decoder) string() (string, error) {
	if d.peek() != '"' {
		return "", d.unexpected("a string")
	}
	raw, err := d.str()
	if err != nil {
		return "", err
	}
	if d.esc {
		raw = d.unquote(raw)
	}
	return d.keep(raw), nil
}

// encryptionType reads EncryptionType; the two values Kinesis writes are the SDK's constants,
// which take no room in the text arena.
func (d *decoder) encryptionType() (types.EncryptionType, error) {
	raw, err := d.unquoted()
	if err != nil {
		return "", err
	}
	switch string(raw) {
	case string(types.EncryptionTypeKms):
		return types.EncryptionTypeKms, nil
	case string(types.EncryptionTypeNone):
		return types.EncryptionTypeNone, nil
	}
	return types.EncryptionType(d.keep(raw)), nil
}

func (d *decoder) newString() (*string, error) {
	s, err := d.string()
	if err != nil {
		return nil, err
	}
	if len(d.strs) == cap(d.strs) { // a new chunk: pointers into the old one stay valid
		d.strs = make([]string, 0, max(8, 2*d.guess))
	}
	d.strs = append(d.strs, s)
	return &d.strs[len(d.strs)-1], nil
}

// blob reads Data: base64 (standard alphabet, padded; like the SDK's decoder it skips \r and
// \n, which only an escape can put there), decoded into the data buffer and capped so that an
// append to one record's Data cannot write over the next one's.
func (d *decoder) blob() ([]byte, error) {
	if d.peek() != '"' {
		return nil, d.unexpected("a base64 string (Data)")
	}
	if b, ok := d.plainBlob(); ok {
		return b, nil
	}
	start := d.i
	raw, err := d.str()
	if err != nil {
		return nil, err
	}
	if d.esc {
		raw = d.unquote(raw)
	}
	dst := d.reserve(base64.StdEncoding.DecodedLen(len(raw)), start)
	n, err := base64.StdEncoding.Decode(dst, raw)
	if err != nil {
		return nil, d.errAt(start, "invalid base64 in Data ("+err.Error()+")")
	}
	d.data = d.data[:len(d.data)+n]
	return dst[:n:n], nil
}

// plainBlob is blob's fast path, for Data as Kinesis writes it: no escape. It finds the closing
// quote with IndexByte instead of scanning the string a byte at a time, and lets the base64
// decoder check the bytes: it refuses every control character but \r and \n (which the SDK's
// parser refuses in a string), and a decoded length short of the string's betrays those. When
// it cannot tell, it returns ok=false and blob takes the checking path.
func (d *decoder) plainBlob() ([]byte, bool) {
	start := d.i + 1
	q := bytes.IndexByte(d.b[start:], '"')
	if q < 0 {
		return nil, false
	}
	raw := d.b[start : start+q]
	if len(raw)%4 != 0 || bytes.IndexByte(raw, '\\') >= 0 {
		return nil, false
	}
	want := len(raw) / 4 * 3
	if len(raw) > 0 && raw[len(raw)-1] == '=' {
		want--
		if raw[len(raw)-2] == '=' {
			want--
		}
	}
	dst := d.reserve(want, start)
	if n, err := base64.StdEncoding.Decode(dst, raw); err != nil || n != want {
		return nil, false
	}
	d.data = d.data[:len(d.data)+want]
	d.i = start + q + 1
	return dst[:want:want], true
}

// newInt64 reads MillisBehindLatest as the SDK does: an integer within int64, without fraction
// or exponent (see parseInt).
func (d *decoder) newInt64() (*int64, error) {
	start := d.peek()
	if start == '"' || start == '{' || start == '[' {
		return nil, d.unexpected("an integer")
	}
	off := d.i
	num, err := d.number()
	if err != nil {
		return nil, err
	}
	v, ok := parseInt(num)
	if !ok {
		return nil, d.errAt(off, "not an int64: "+clip(num))
	}
	return &v, nil
}

// parseInt is the SDK's integer parser (smithy-go's JSON parseInt), quirk included: it stops
// as soon as a negative number's digits reach 9223372036854775808, and reads math.MinInt64
// whatever follows ("-92233720368547758089", "-9223372036854775808.5"). A differential run
// found the SDK accepting those; Decode must not refuse what the SDK accepts.
func parseInt(b []byte) (int64, bool) {
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	const cutoff = math.MaxUint64/10 + 1
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' || n >= cutoff {
			return 0, false
		}
		nn := n*10 + uint64(c-'0')
		if nn < n {
			return 0, false
		}
		n = nn
		if n > math.MaxInt64 {
			if neg && n == math.MaxInt64+1 {
				return math.MinInt64, true
			}
			return 0, false
		}
	}
	if neg {
		return -int64(n), true
	}
	return int64(n), true
}

// newTime reads ApproximateArrivalTimestamp, epoch seconds, into the time the SDK makes of it.
func (d *decoder) newTime() (*time.Time, error) {
	secs, err := d.epochSeconds()
	if err != nil {
		return nil, err
	}
	if len(d.times) == cap(d.times) { // a new chunk: pointers into the old one stay valid
		d.times = make([]time.Time, 0, max(8, d.guess))
	}
	d.times = append(d.times, epochTime(secs))
	return &d.times[len(d.times)-1], nil
}

// epochSeconds reads a number as the SDK's float reader does: any JSON number, in decimal or
// exponent form (1441215410.867 and 1.441215410867E9 alike), parsed as parseFloat says (out of
// float64's range is an error), or one of the strings "Infinity" and "-Infinity" in any
// case. "NaN", which it also accepts, makes the SDK panic (big.NewFloat(NaN)); here it is an
// error.
func (d *decoder) epochSeconds() (float64, error) {
	off := d.i
	if d.peek() == '"' {
		raw, err := d.str()
		if err != nil {
			return 0, err
		}
		s := unsafe.String(unsafe.SliceData(raw), len(raw))
		if d.esc {
			u := d.unquote(raw)
			s = unsafe.String(unsafe.SliceData(u), len(u))
		}
		switch {
		case strings.EqualFold(s, "Infinity"):
			return math.Inf(1), nil
		case strings.EqualFold(s, "-Infinity"):
			return math.Inf(-1), nil
		}
		return 0, d.errAt(off, "timestamp is a string other than Infinity and -Infinity")
	}
	num, err := d.number()
	if err != nil {
		return 0, err
	}
	f, err := parseFloat(num)
	if err != nil {
		return 0, d.errAt(off, "timestamp out of range: "+clip(num))
	}
	return f, nil
}

// parseFloat reads a number as the SDK's float reader does: its integer parser first (so its
// quirk, see parseInt, reads "-9223372036854775808e-10" as math.MinInt64), then
// strconv.ParseFloat. What Kinesis writes (1441215410.867: at most 15 digits, no exponent)
// takes Clinger's fast path instead: the digits make an integer below 2^53 and the decimals a
// power of ten below 1e22, both exact in float64, so their quotient is one correctly rounded
// IEEE division, the float that both of the SDK's paths return.
func parseFloat(num []byte) (float64, error) {
	b := num
	if b[0] == '-' {
		b = b[1:]
	}
	var m uint64
	n, point := 0, -1
	for i, c := range b {
		switch {
		case c >= '0' && c <= '9':
			m = m*10 + uint64(c-'0')
			n++
		case c == '.':
			point = i
		default: // an exponent
			n = 16
		}
	}
	if n > 15 {
		if v, ok := parseInt(num); ok {
			return float64(v), nil
		}
		return strconv.ParseFloat(unsafe.String(&num[0], len(num)), 64)
	}
	f := float64(m)
	if point >= 0 {
		f /= pow10[len(b)-point-1]
	}
	if num[0] == '-' {
		f = -f
	}
	return f, nil
}

var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// epochTime is smithy-go's time.ParseEpochSeconds without its big.Float (allocations, and most
// of the SDK's time per timestamp): the milliseconds are secs×1000 rounded to 53 bits, nearest
// even, which float64 multiplication also does, then truncated toward zero and clamped to int64
// as big.Float.Int64 does (float64 overflows to ±Inf where big.Float does not, but both clamp);
// the product with 1e6 wraps as the SDK's does. The tests hold it to the SDK's function over
// thousands of values.
func epochTime(secs float64) time.Time {
	var ms int64
	switch m := secs * 1000; {
	case m >= 0x1p63:
		ms = math.MaxInt64
	case m <= -0x1p63:
		ms = math.MinInt64
	default:
		ms = int64(m)
	}
	return time.Unix(0, ms*1e6).UTC()
}

// clip keeps an error message short whatever the body holds.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
