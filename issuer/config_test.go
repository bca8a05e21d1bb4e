package issuer

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestConfigValidateNamesTheField(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig does not validate: %v", err)
	}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"CommitTimeout", func(c *Config) { c.CommitTimeout = 0 }},
		{"MaxInFlight", func(c *Config) { c.MaxInFlight = 0 }},
		{"StreamReplicas", func(c *Config) { c.StreamReplicas = 2 }},
		{"PublishBatch", func(c *Config) { c.PublishBatch = 0 }},
		{"ConfirmEvery", func(c *Config) { c.ConfirmEvery = -time.Second }},
		{"PublishLinger", func(c *Config) { c.PublishLinger = -time.Millisecond }},
		{"PublishLinger", func(c *Config) { c.PublishLinger = MaxPublishLinger + 1 }},
		{"RefusalRate", func(c *Config) { c.RefusalRate = -1 }},
		{"RefusalBurst", func(c *Config) { c.RefusalBurst = 0 }},
		{"RefusalWindow", func(c *Config) { c.RefusalWindow = -time.Second }},
		{"StatusDigestShare", func(c *Config) { c.StatusDigestShare = -0.1 }},
		{"StatusDigestShare", func(c *Config) { c.StatusDigestShare = 1.5 }},
		{"StatusDigestShare", func(c *Config) { c.StatusDigestShare = math.NaN() }},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		err := c.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: Validate() = %v; want ErrConfig naming %s", tc.field, err, tc.field)
		}
	}
}
