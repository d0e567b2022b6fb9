package shard

// keyQueue is the deliveries of one ordering key that are not acked yet, in sequence order;
// only the first may be out.
type keyQueue struct {
	key   string
	items []*delivery
	head  int
}

func (q *keyQueue) front() *delivery {
	if q.head < len(q.items) {
		return q.items[q.head]
	}
	return nil
}

func (q *keyQueue) push(d *delivery) { q.items = append(q.items, d) }

// pop removes the front, and reports whether the queue is empty now. The queue is moved down
// to the front of its array once half of it is popped: a queue that never empties (the shard's
// with OrderByShard, which holds the next record while one is out) grew by one slot per
// message without it.
func (q *keyQueue) pop() bool {
	q.items[q.head] = nil
	q.head++
	switch {
	case q.head == len(q.items):
		if cap(q.items) > maxIdleQueueCap {
			q.items = nil // a burst's array is not kept for good
		}
		q.items, q.head = q.items[:0], 0
		return true
	case q.head >= 16 && 2*q.head >= len(q.items):
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return false
}

// maxIdleQueueCap is the largest array an emptied key queue keeps for reuse.
const maxIdleQueueCap = 64

// readyHeap is a min-heap of deliveries by ord.
type readyHeap []*delivery

func (h readyHeap) peek() *delivery {
	if len(h) == 0 {
		return nil
	}
	return h[0]
}

func (h *readyHeap) push(d *delivery) {
	*h = append(*h, d)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p].ord <= s[i].ord {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *readyHeap) pop() *delivery {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = nil
	s = s[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && s[l].ord < s[m].ord {
			m = l
		}
		if r := l + 1; r < n && s[r].ord < s[m].ord {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
