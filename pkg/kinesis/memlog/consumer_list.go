package memlog

import (
	"context"
	"encoding/binary"
	"maps"
	"slices"
	"strconv"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// ListStreamConsumers lists the consumers of the stream StreamARN names, in name order,
// MaxResults (1..10000; at most and by default 100, as on AWS) at a time, with a NextToken
// (valid five minutes) while more remain. A NextToken comes with the same StreamARN it was
// issued for. StreamCreationTimestamp, if given, must be the stream's.
func (l *Log) ListStreamConsumers(ctx context.Context, in *awskinesis.ListStreamConsumersInput, _ ...func(*awskinesis.Options)) (*awskinesis.ListStreamConsumersOutput, error) {
	if in == nil {
		in = &awskinesis.ListStreamConsumersInput{}
	}
	if err := l.before(ctx, Call{Op: "ListStreamConsumers", Stream: refName(nil, in.StreamARN)}); err != nil {
		return nil, err
	}
	var c checks
	c.required(top("streamARN"), in.StreamARN)
	r := l.parseRef(&c, nil, in.StreamARN)
	limit := defaultConsumerList
	if m := in.MaxResults; m != nil {
		s := strconv.Itoa(int(*m))
		switch {
		case *m < 1:
			c.fail(&s, top("maxResults"), "have value greater than or equal to 1")
		case *m > maxConsumerListParam:
			c.fail(&s, top("maxResults"), "have value less than or equal to 10000")
		}
		limit = min(int(*m), defaultConsumerList)
	}
	if s := in.NextToken; s != nil {
		switch {
		case *s == "":
			c.fail(s, top("nextToken"), "have length greater than or equal to 1")
		case len(*s) > maxConsumerTokenLen:
			c.fail(s, top("nextToken"), "have length less than or equal to 1048576")
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	st, err := l.find(r)
	if err != nil {
		return nil, err
	}
	if ts := in.StreamCreationTimestamp; ts != nil && ts.UnixMilli() != st.created.UnixMilli() {
		return nil, errNotFound("Stream %s under account %s with creation timestamp %s not found.",
			st.name, l.account, amzTime(*ts))
	}
	var from string // list the names after this one
	if in.NextToken != nil {
		if from, err = l.decodeConsumerToken(*in.NextToken, st); err != nil {
			return nil, err
		}
	}
	now := l.now()
	l.fanout.mu.Lock()
	defer l.fanout.mu.Unlock()
	names := slices.Sorted(maps.Keys(l.fanout.consumers[st]))
	i, _ := slices.BinarySearch(names, from)
	if i < len(names) && names[i] == from {
		i++ // names are never "", so this only skips the last name of the previous page
	}
	out := &awskinesis.ListStreamConsumersOutput{Consumers: []types.Consumer{}}
	for ; i < len(names) && len(out.Consumers) < limit; i++ {
		cons := l.fanout.consumers[st][names[i]]
		out.Consumers = append(out.Consumers, types.Consumer{
			ConsumerARN:               ptr(cons.arn),
			ConsumerName:              ptr(cons.name),
			ConsumerCreationTimestamp: ptr(cons.registered),
			ConsumerStatus:            l.status(cons, now),
		})
	}
	if i < len(names) {
		out.NextToken = ptr(l.encodeConsumerToken(st, names[i-1], now))
	}
	return out, nil
}

// encodeConsumerToken seals a ListStreamConsumers NextToken: the stream, the last name listed
// and when. Listing on after a name, not an offset, keeps pages right while consumers come and
// go between them.
//
// Encoded (before sealing) as: kind (1) | incarnation (8) | issue time in Unix ms (8) | length of
// the stream name (1) | stream name | consumer name.
func (l *Log) encodeConsumerToken(st *stream, last string, now time.Time) string {
	b := make([]byte, 0, consumerTokenHeader+len(st.name)+len(last)+macLen)
	b = append(b, tokConsumers)
	b = binary.BigEndian.AppendUint64(b, st.incarnation)
	b = binary.BigEndian.AppendUint64(b, uint64(now.UnixMilli()))
	b = append(b, byte(len(st.name)))
	b = append(b, st.name...)
	b = append(b, last...)
	return l.sign.seal(b)
}

// decodeConsumerToken opens a ListStreamConsumers NextToken issued for st and returns the name
// to list after.
func (l *Log) decodeConsumerToken(s string, st *stream) (string, error) {
	msg, ok := l.sign.open(s)
	if !ok || len(msg) < consumerTokenHeader || msg[0] != tokConsumers {
		return "", errInvalid("Invalid NextToken.")
	}
	inc := binary.BigEndian.Uint64(msg[1:])
	issued := time.UnixMilli(int64(binary.BigEndian.Uint64(msg[9:])))
	n := int(msg[17])
	rest := msg[consumerTokenHeader:]
	if len(rest) < n || string(rest[:n]) != st.name || inc != st.incarnation {
		return "", errInvalid("NextToken was not issued for stream %s.", st.arn)
	}
	if now := l.now(); now.Sub(issued) > consumerTokenLifetime {
		return "", &types.ExpiredNextTokenException{Message: ptr("The NextToken was issued at " +
			amzTime(issued) + ", more than 300 seconds before now (" + amzTime(now) + "), and has expired.")}
	}
	return string(rest[n:]), nil
}
