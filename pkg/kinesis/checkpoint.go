package kinesis

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// deliveryState is where one delivered message stands.
type deliveryState int

const (
	stateSent   deliveryState = iota // handed to the subscriber's channel, not settled yet
	stateAcked                       // acked: done
	stateNacked                      // nacked: to be delivered again at resendAt
)

// delivery is one record in a shard's in-flight window. The shard's reader goroutine owns it.
type delivery struct {
	seq    string
	msg    *message.Message
	cancel context.CancelFunc // cancels msg's context
	info   RecordInfo

	state    deliveryState
	resendAt time.Time
}

// settle moves d to acked or nacked if its message was settled, cancelling its context; it
// reports whether the state changed. It never blocks.
func (d *delivery) settle(now time.Time, nackSleep time.Duration) bool {
	if d.state != stateSent {
		return false
	}
	select {
	case <-d.msg.Acked():
		d.state = stateAcked
	case <-d.msg.Nacked():
		d.state = stateNacked
		d.resendAt = now
		if nackSleep > 0 {
			d.resendAt = now.Add(nackSleep)
		}
	default:
		return false
	}
	d.cancel()
	return true
}

// watermark returns how many deliveries at the front of the window are acked and the sequence
// number of the last of them: the checkpoint may move there, since every record up to it is
// done. A record acked behind an unacked one does not move it.
func watermark(window []*delivery) (done int, seq string) {
	for done < len(window) && window[done].state == stateAcked {
		seq = window[done].seq
		done++
	}
	return done, seq
}

// nextResend returns the nacked delivery due first, or nil.
func nextResend(window []*delivery) *delivery {
	var first *delivery
	for _, d := range window {
		if d.state == stateNacked && (first == nil || d.resendAt.Before(first.resendAt)) {
			first = d
		}
	}
	return first
}

// settlePollInterval is how soon a reader looks again at a window holding more than one
// unsettled message: their Acks and Nacks, except the oldest one's, wake nothing.
const settlePollInterval = 5 * time.Millisecond

// unsettled counts the deliveries sent and not yet seen acked or nacked.
func unsettled(window []*delivery) int {
	n := 0
	for _, d := range window {
		if d.state == stateSent {
			n++
		}
	}
	return n
}

// oldestUnsettled is the delivery whose Ack or Nack the reader waits on.
func oldestUnsettled(window []*delivery) *delivery {
	for _, d := range window {
		if d.state == stateSent {
			return d
		}
	}
	return nil
}
