package memlog

import (
	"strings"
)

// streamRef is how a request names its stream: by StreamName, by StreamARN, or both.
type streamRef struct {
	name, arnName   string // "" when absent
	byName, byARN   bool
	region, account string // from the ARN
	arnOK           bool   // the ARN parsed
}

const arnPattern = `arn:aws.*:kinesis:.*:\d{12}:stream/\S+`

// parseRef reads StreamName and StreamARN, recording schema violations in c. Which stream they
// name, and whether it exists, is find's business.
func (l *Log) parseRef(c *checks, name, arn *string) streamRef {
	var r streamRef
	if name != nil {
		r.byName, r.name = true, *name
		c.name(top("streamName"), *name)
	}
	if arn != nil {
		r.byARN = true
		r.region, r.account, r.arnName, r.arnOK = parseARN(*arn)
		if !r.arnOK {
			c.fail(arn, top("streamARN"), "satisfy regular expression pattern: "+arnPattern)
		}
	}
	return r
}

// find resolves a parsed reference to a live stream, with AWS's errors for the ways it can fail.
func (l *Log) find(r streamRef) (*stream, error) {
	switch {
	case !r.byName && !r.byARN:
		return nil, errInvalid("Either StreamName or StreamARN should be provided.")
	case r.byName && r.byARN && r.name != r.arnName:
		return nil, errInvalid("StreamARN %s and StreamName %s do not refer to the same stream.",
			l.arn(r.arnName), r.name)
	case r.byARN && (r.region != l.region || r.account != l.account):
		return nil, errNotFound("Stream %s under account %s not found.", r.arnName, r.account)
	}
	name := r.name
	if !r.byName {
		name = r.arnName
	}
	st := l.lookup(name)
	if st == nil {
		return nil, l.errStreamNotFound(name)
	}
	return st, nil
}

// resolve is parseRef and find for requests that have no other members to validate.
func (l *Log) resolve(name, arn *string) (*stream, error) {
	var c checks
	r := l.parseRef(&c, name, arn)
	if err := c.err(); err != nil {
		return nil, err
	}
	return l.find(r)
}

// refName is the stream a request names, for the fault hook, before any validation.
func refName(name, arn *string) string {
	if name != nil {
		return *name
	}
	if arn != nil {
		if _, _, n, ok := parseARN(*arn); ok {
			return n
		}
	}
	return ""
}

// parseARN splits arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME.
func parseARN(arn string) (region, account, name string, ok bool) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || !strings.HasPrefix(parts[1], "aws") || parts[2] != "kinesis" {
		return "", "", "", false
	}
	region, account = parts[3], parts[4]
	name, found := strings.CutPrefix(parts[5], "stream/")
	if !found || name == "" || strings.ContainsAny(name, " \t\r\n") || len(account) != 12 {
		return "", "", "", false
	}
	for i := 0; i < len(account); i++ {
		if account[i] < '0' || account[i] > '9' {
			return "", "", "", false
		}
	}
	return region, account, name, true
}

// arn is the ARN of the Log's stream called name.
func (l *Log) arn(name string) string {
	return "arn:aws:kinesis:" + l.region + ":" + l.account + ":stream/" + name
}
