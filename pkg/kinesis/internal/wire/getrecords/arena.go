package getrecords

import "unsafe"

// maxTextChunk bounds a chunk of the text arena, and so what a kept string keeps alive (a
// string longer than that gets a chunk of its own size): the largest answers' strings take a
// few chunks rather than one, and a first record rich in strings followed by records rich in
// Data cannot make one chunk that is mostly empty.
const maxTextChunk = 256 << 10

// Where an answer's bytes live (see the package documentation, Memory). Data slices are carved
// from the data buffer, strings from the text arena, never from each other: a string kept
// alive keeps its chunk of strings alive, not the answer's Data.

// reserve returns n bytes of the data buffer past its length, for the Data string that starts
// at offset from. The first call makes it room for all the Data that the body from there on
// can hold: base64 decodes 4 bytes into 3 and an escape only shrinks what it writes. Only a
// Data string whose unescaping turns invalid UTF-8 into U+FFFD (3 bytes for 1) can outgrow it,
// and it gets a fresh chunk (its decoding then fails: U+FFFD is not base64); what was carved
// from the old one stays where it is. An empty Data is an empty slice of no buffer, not nil,
// as in the SDK.
func (d *decoder) reserve(n, from int) []byte {
	if n == 0 {
		return []byte{}
	}
	if cap(d.data)-len(d.data) < n {
		d.data = make([]byte, 0, max(n, (len(d.b)-from)/4*3))
	}
	return d.data[len(d.data) : len(d.data)+n]
}

// keep copies b into the text arena and returns it as a string sharing the arena. When the
// chunk is full it starts another (d.kept counts the bytes of those before); the strings
// carved from the old one stay where they are.
func (d *decoder) keep(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	n := len(d.text)
	if cap(d.text)-n < len(b) {
		d.kept += n
		d.text, n = make([]byte, 0, d.textChunk(len(b))), 0
	}
	d.text = d.text[:n+len(b)]
	copy(d.text[n:], b)
	return unsafe.String(&d.text[n], len(b))
}

// textChunk sizes the text arena's next chunk: n bytes at least, maxTextChunk at most. The
// first, made at the answer's first string when nothing is known of it yet, takes a quarter of
// the body left, about what the strings of records with small payloads take (less for larger
// payloads). Made later, after the first records, among the records' own large allocations, it
// made the runtime return and refault pages in BenchmarkDecode: 20% more time per record. A
// later chunk takes the bytes of strings kept so far per byte of body read, times the bytes
// left, a quarter more (records of uneven size), plus room for what follows the records
// (NextShardIterator, ChildShards).
func (d *decoder) textChunk(n int) int {
	rest := len(d.b) - d.i
	est := int64(rest / 4)
	if d.kept > 0 {
		est = int64(d.kept)*int64(rest)/int64(max(d.i, 1))*5/4 + 512
	}
	return max(n, int(min(est, maxTextChunk)))
}
