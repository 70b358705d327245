package share

import (
	"github.com/fjordlog/fjord/group/assign"
	"github.com/fjordlog/fjord/group/topics"
)

// The topics a group sees are package topics' Image, shared with
// group/consumer; the names here keep this package's API whole for
// its callers.

// TopicID is a topic's KIP-516 id.
type TopicID = assign.TopicID

// Topic is what a group needs to know of a topic.
type Topic = topics.Topic

// Image is an immutable view of the cluster's topics (see topics.Image).
type Image = topics.Image

// NewImage copies ts into an Image (see topics.NewImage).
func NewImage(ts []Topic) *Image { return topics.NewImage(ts) }
