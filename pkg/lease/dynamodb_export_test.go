package lease

// SetDynamoDBQueryLimit caps the items of each Query page List reads, so that tests can make a
// small partition span many pages.
func SetDynamoDBQueryLimit(s *DynamoDBStore, limit int32) { s.queryLimit = limit }
