package memlog

import (
	"sync"
	"time"
)

// fanOutQuota is one consumer's quotas on one shard, kept with the consumer so a subscription
// that takes over from another shares its budget: SubscribeToShard calls, and the bytes pushed.
type fanOutQuota struct {
	mu    sync.Mutex
	calls bucket // SubscribeToShard calls (Quotas.SubscribeCalls)
	push  bucket // bytes pushed (Quotas.FanOutBytes)
}

// admitSubscribe takes one SubscribeToShard call of cons for sh from its quota. It returns the
// pair's quotas, for the subscription to pace its pushes by (nil when Config.Quotas is unset),
// or LimitExceededException over the rate. AWS documents no message for it; this one has the
// form of its other rate messages.
func (l *Log) admitSubscribe(st *stream, cons *consumer, sh *shard, now time.Time) (*fanOutQuota, error) {
	lim := l.quotas
	if lim == nil {
		return nil, nil
	}
	l.fanout.mu.Lock()
	fq := cons.quota[sh.index]
	if fq == nil {
		fq = &fanOutQuota{}
		if cons.quota == nil {
			cons.quota = map[int]*fanOutQuota{}
		}
		cons.quota[sh.index] = fq
	}
	l.fanout.mu.Unlock()
	if !lim.on("SubscribeCalls") {
		return fq, nil
	}
	fq.mu.Lock()
	ok := fq.calls.take(lim.subscribes, now, 1)
	fq.mu.Unlock()
	if !ok {
		st.usage.throttle("SubscribeToShard")
		return nil, errLimit("Rate exceeded for consumer %s on shard %s in stream %s under account %s.",
			cons.arn, sh.id, st.name, l.account)
	}
	return fq, nil
}

// pushWait is how long a subscription must wait before its next event, to keep its consumer's
// pushes from the shard under Quotas.FanOutBytes a second: 0 unless the bytes pushed so far
// are ahead of the rate.
func (s *subscription) pushWait() time.Duration {
	lim := s.l.quotas
	if s.quota == nil || !lim.on("FanOutBytes") {
		return 0
	}
	s.quota.mu.Lock()
	defer s.quota.mu.Unlock()
	return s.quota.push.wait(lim.fanOut, s.l.now(), 0)
}

// pushed charges an event's bytes (data and keys) to the consumer's push budget on the shard.
func (s *subscription) pushed(size int) {
	lim := s.l.quotas
	if s.quota == nil || !lim.on("FanOutBytes") {
		return
	}
	s.quota.mu.Lock()
	defer s.quota.mu.Unlock()
	s.quota.push.charge(lim.fanOut, s.l.now(), int64(size))
}

// pace waits, on the Log's timer, until the consumer's push budget on the shard allows the next
// event. It returns the error the stream ends with if it ends meanwhile.
func (s *subscription) pace() error {
	for {
		d := s.pushWait()
		if d <= 0 {
			return nil
		}
		select {
		case <-s.l.after(d):
		case <-s.ended:
			return s.endErr
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
}
