package getrecords

import (
	"encoding/binary"
	"fmt"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the nesting the SDK's JSON parser accepts (encoding/json's limit): a body nested
// deeper fails there, so it fails here too, and skipping an unknown member cannot recurse
// without bound.
const maxDepth = 10_000

// syntaxError says what is wrong with a body and at which byte; Decode wraps it in a
// *smithy.DeserializationError, the type the SDK's deserializer returns.
type syntaxError struct {
	what string
	off  int
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("getrecords: %s at offset %d", e.what, e.off)
}

// scanner reads JSON tokens from a body. It accepts exactly what the SDK's parser accepts
// (smithy-go's transport/http/protocol/internal/json): the same whitespace, the same number
// grammar, any byte from 0x20 up inside strings (UTF-8 is not checked there either), the same
// escapes, the same nesting limit. It never panics: every index is checked against the body.
type scanner struct {
	b     []byte
	i     int
	depth int
	esc   bool   // set by str: the string just scanned holds an escape
	tmp   []byte // scratch for unescaping, reused
}

func (s *scanner) errAt(off int, what string) error {
	return &syntaxError{what: what, off: off}
}

// unexpected reports what was found at s.i where want was expected.
func (s *scanner) unexpected(want string) error {
	if s.i >= len(s.b) {
		return s.errAt(s.i, "unexpected end of body, expected "+want)
	}
	return s.errAt(s.i, fmt.Sprintf("expected %s, found %q", want, s.b[s.i]))
}

// peek skips whitespace and returns the next byte, or 0 at the end of the body (a NUL in the
// body is never valid where peek is asked, so the two need not be told apart until unexpected
// reports it).
func (s *scanner) peek() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// open enters the container whose first byte the caller has peeked.
func (s *scanner) open() error {
	if s.depth++; s.depth > maxDepth {
		return s.errAt(s.i, "nesting deeper than 10000")
	}
	s.i++
	return nil
}

// openAs enters a container that must start with c ('{' or '['); what names it for the error.
func (s *scanner) openAs(c byte, what string) error {
	if s.peek() != c {
		return s.unexpected(what)
	}
	return s.open()
}

// member moves to the next member of the object open at this level: it returns the member's
// name as written (s.esc says whether it holds an escape) with the ':' consumed, or more=false
// once the object is closed.
func (s *scanner) member(first bool) (name []byte, more bool, err error) {
	c := s.peek()
	if c == '}' {
		s.i++
		s.depth--
		return nil, false, nil
	}
	if !first {
		if c != ',' {
			return nil, false, s.unexpected("',' or '}'")
		}
		s.i++
		c = s.peek()
	}
	if c != '"' {
		return nil, false, s.unexpected("a member name")
	}
	if name, err = s.str(); err != nil {
		return nil, false, err
	}
	if s.peek() != ':' {
		return nil, false, s.unexpected("':'")
	}
	s.i++
	return name, true, nil
}

// elem moves to the next element of the array open at this level, or returns more=false once
// the array is closed.
func (s *scanner) elem(first bool) (more bool, err error) {
	c := s.peek()
	if c == ']' && first {
		s.i++
		s.depth--
		return false, nil
	}
	if first {
		return true, nil
	}
	switch c {
	case ']':
		s.i++
		s.depth--
		return false, nil
	case ',':
		s.i++
		if s.peek() == ']' {
			return false, s.unexpected("a value")
		}
		return true, nil
	}
	return false, s.unexpected("',' or ']'")
}

// null consumes a null literal if one comes next.
func (s *scanner) null() bool {
	if s.peek() == 'n' && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

func (s *scanner) literal(lit string) error {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return s.errAt(s.i, "invalid literal")
	}
	s.i += len(lit)
	return nil
}

// SWAR: one 64-bit word tells whether any of its 8 bytes is a quote, a backslash or a control
// character; a string's plain run is skipped a word at a time.
const (
	lo = uint64(0x0101010101010101)
	hi = uint64(0x8080808080808080)
)

func hasByte(v uint64, c byte) uint64 { x := v ^ (lo * uint64(c)); return (x - lo) &^ x & hi }
func hasLess(v uint64, n byte) uint64 { return (v - lo*uint64(n)) &^ v & hi }

// str scans the string at s.i (the caller has peeked its '"') and returns the bytes between the
// quotes; s.esc says whether they hold an escape, and every escape in them is then valid.
func (s *scanner) str() ([]byte, error) {
	start := s.i + 1
	s.esc = false
	for i := start; ; {
		for i+8 <= len(s.b) {
			v := binary.LittleEndian.Uint64(s.b[i:])
			if hasLess(v, 0x20)|hasByte(v, '"')|hasByte(v, '\\') != 0 {
				break
			}
			i += 8
		}
		if i >= len(s.b) {
			return nil, s.errAt(start-1, "unterminated string")
		}
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			return s.b[start:i], nil
		case c == '\\':
			n, err := s.escape(i)
			if err != nil {
				return nil, err
			}
			s.esc = true
			i += n
		case c < 0x20:
			return nil, s.errAt(i, "control character in string")
		default:
			i++
		}
	}
}

// escape checks the escape at s.b[i] ('\\') and returns its length.
func (s *scanner) escape(i int) (int, error) {
	if i+1 >= len(s.b) {
		return 0, s.errAt(i, "unterminated escape")
	}
	switch s.b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
		if i+6 > len(s.b) {
			return 0, s.errAt(i, "incomplete \\u escape")
		}
		if hex4(s.b[i+2:i+6]) < 0 {
			return 0, s.errAt(i, "invalid \\u escape")
		}
		return 6, nil
	}
	return 0, s.errAt(i, "invalid escape")
}

// hex4 is the value of four hex digits, or -1.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unquote returns raw (a string's bytes, escapes checked by str) unescaped, in s.tmp. It is the
// SDK's unquote (a copy of encoding/json's): a lone or mismatched surrogate becomes U+FFFD, and
// so does every byte of invalid UTF-8, but only in a string that holds an escape; the SDK copies
// a string without one as it is, and so do the callers.
func (s *scanner) unquote(raw []byte) []byte {
	dst := s.tmp[:0]
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '\\':
			var r rune
			r, i = unescape(raw, i)
			dst = utf8.AppendRune(dst, r)
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			dst = utf8.AppendRune(dst, r)
			i += n
		}
	}
	s.tmp = dst
	return dst
}

// unescape decodes the (checked) escape at raw[i] and returns the rune and the index after it.
func unescape(raw []byte, i int) (rune, int) {
	switch c := raw[i+1]; c {
	case 'u':
		return unescapeU(raw, i)
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	default: // '"', '\\', '/'
		return rune(c), i + 2
	}
}

// unescapeU decodes the \uXXXX escape at raw[i], with the next one if the two are a surrogate
// pair.
func unescapeU(raw []byte, i int) (rune, int) {
	r := hex4(raw[i+2:])
	i += 6
	if !utf16.IsSurrogate(r) {
		return r, i
	}
	// A high surrogate takes the next \u escape with it if the two make a pair; otherwise
	// it is U+FFFD and the next escape is read on its own.
	if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
		if pair := utf16.DecodeRune(r, hex4(raw[i+2:])); pair != unicode.ReplacementChar {
			return pair, i + 6
		}
	}
	return unicode.ReplacementChar, i
}

// number scans a JSON number (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?) and returns it.
func (s *scanner) number() ([]byte, error) {
	b, start := s.b, s.i
	i := start
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) || b[i] < '0' || b[i] > '9' {
		s.i = i
		return nil, s.unexpected("a value")
	}
	if b[i] == '0' {
		i++
	} else {
		i = digits(b, i)
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return nil, s.errAt(i+1, "no digits after the decimal point")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return nil, s.errAt(i, "no digits in the exponent")
		}
		i = j
	}
	s.i = i
	return b[start:i], nil
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// skip passes over one value of any type, checking it as the SDK's parser would.
func (s *scanner) skip() error {
	switch s.peek() {
	case '{':
		if err := s.open(); err != nil {
			return err
		}
		for first := true; ; first = false {
			_, more, err := s.member(first)
			if err != nil || !more {
				return err
			}
			if err := s.skip(); err != nil {
				return err
			}
		}
	case '[':
		if err := s.open(); err != nil {
			return err
		}
		for first := true; ; first = false {
			more, err := s.elem(first)
			if err != nil || !more {
				return err
			}
			if err := s.skip(); err != nil {
				return err
			}
		}
	case '"':
		_, err := s.str()
		return err
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	_, err := s.number()
	return err
}
