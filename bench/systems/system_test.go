package systems

import (
	"encoding/json"
	"testing"
)

func TestPayloadIsValidJSONOfTheAskedSize(t *testing.T) {
	for _, size := range []int{64, 256, 1024} {
		for _, i := range []int{0, 7, 123456} {
			p := Payload("c64", i, size)
			if len(p) != size {
				t.Fatalf("Payload(%d, %d) is %d bytes", i, size, len(p))
			}
			var v map[string]string
			if err := json.Unmarshal(p, &v); err != nil || v["command"] == "" {
				t.Fatalf("Payload(%d, %d) = %s: %v", i, size, p, err)
			}
		}
	}
	if string(Payload("a", 1, 256)) == string(Payload("a", 2, 256)) {
		t.Fatal("payloads of different tickets are equal")
	}
}
