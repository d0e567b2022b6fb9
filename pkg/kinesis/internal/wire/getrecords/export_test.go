package getrecords

import "github.com/aws/smithy-go/middleware"

// EpochTime lets the external tests hold the timestamp conversion to smithy-go's.
var EpochTime = epochTime

// KeepBuf lets the external tests hold the pool's rule (putBuf) to its figures.
var KeepBuf = keepBuf

// Pool limits, for the tests of KeepBuf.
const (
	MaxPooled = maxPooled
	PoolSlack = poolSlack
)

// BareDeserializer is the fast deserializer with no SDK deserializer behind it, as if
// Deserialize.Swap had returned (nil, nil).
func BareDeserializer() middleware.DeserializeMiddleware { return &deserializer{} }

// IsJSON lets the external tests list the Content-Types Decode reads.
var IsJSON = isJSON
