package lease

import "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

// SetDynamoDBQueryLimit caps the items of each Query page List and Members read, so that tests
// can make a small partition span many pages.
func SetDynamoDBQueryLimit(s *DynamoDBStore, limit int32) { s.queryLimit = limit }

// DynamoDBRawItemSize is the size of any item as DynamoDBItemSize counts it, for tests that
// compare the items the store wrote with what DynamoDBItemSize says of them.
func DynamoDBRawItemSize(item map[string]types.AttributeValue) int { return itemSize(item) }

// DynamoDBMemberItem is the member record of m as memberToItem makes it.
func DynamoDBMemberItem(m Member) map[string]types.AttributeValue { return memberToItem(m) }
