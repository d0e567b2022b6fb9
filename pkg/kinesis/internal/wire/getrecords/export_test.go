package getrecords

// EpochTime lets the external tests hold the timestamp conversion to smithy-go's.
var EpochTime = epochTime
