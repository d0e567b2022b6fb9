package memlog

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"sync"
)

// macLen is how much of the HMAC-SHA256 a token keeps: enough that forging one by chance is out
// of the question, short enough to keep iterators well under AWS's 512 characters.
const macLen = 16

// signer seals the opaque tokens a Log hands out (shard iterators, ListShards NextTokens) with
// an HMAC under a random per-Log key, so a forged or garbled token is told apart from a real one
// and a token of another Log is rejected.
type signer struct {
	pool sync.Pool // of hash.Hash, keyed
}

func newSigner() *signer {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	return &signer{pool: sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// seal returns msg and its MAC, base64-encoded.
func (s *signer) seal(msg []byte) string {
	msg = s.appendMAC(msg, msg)
	return base64.StdEncoding.EncodeToString(msg)
}

// open returns the message inside a sealed token, or false if the token was not sealed by s.
func (s *signer) open(token string) ([]byte, bool) {
	raw, err := base64.StdEncoding.Strict().DecodeString(token)
	if err != nil || len(raw) < macLen {
		return nil, false
	}
	msg, mac := raw[:len(raw)-macLen], raw[len(raw)-macLen:]
	var want [sha256.Size]byte
	if !hmac.Equal(mac, s.appendMAC(want[:0], msg)[:macLen]) {
		return nil, false
	}
	return msg, true
}

// appendMAC appends the first macLen bytes of msg's HMAC to dst.
func (s *signer) appendMAC(dst, msg []byte) []byte {
	h := s.pool.Get().(hash.Hash)
	h.Reset()
	h.Write(msg)
	var sum [sha256.Size]byte
	dst = append(dst, h.Sum(sum[:0])[:macLen]...)
	s.pool.Put(h)
	return dst
}
