package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// shape describes what a JSON value in a policy document must look like.
type shape struct {
	kind   shapeKind
	fields map[string]*shape // kindStruct: the exact field names
	elem   *shape            // kindMap, kindList: the element shape
}

type shapeKind uint8

const (
	kindStruct shapeKind = iota
	kindMap
	kindList
	kindString
	kindInt
	kindUint
	kindDuration
	kindTime
	kindBool
)

func strct(fields map[string]*shape) *shape { return &shape{kind: kindStruct, fields: fields} }
func list(elem *shape) *shape               { return &shape{kind: kindList, elem: elem} }
func dict(elem *shape) *shape               { return &shape{kind: kindMap, elem: elem} }

var (
	sString   = &shape{kind: kindString}
	sInt      = &shape{kind: kindInt}
	sUint     = &shape{kind: kindUint}
	sDuration = &shape{kind: kindDuration}
	sTime     = &shape{kind: kindTime}
	sBool     = &shape{kind: kindBool}
	sStrings  = list(sString)

	documentShapeV1 = strct(map[string]*shape{
		"version":     sInt,
		"default_ttl": sDuration,
		"lanes": dict(strct(map[string]*shape{
			"tools": sStrings,
			"deny":  sStrings,
			"ttl":   sDuration,
		})),
		"workers": dict(sString),
	})

	ruleFields = map[string]*shape{
		"id": sString, "lanes": sStrings, "workers": sStrings, "tools": sStrings, "targets": sStrings,
		"max_amount": sUint,
	}

	levelRuleFields = map[string]*shape{"match": sString, "authority": sString}

	documentShapeV2 = strct(map[string]*shape{
		"version":     sInt,
		"default_ttl": sDuration,
		"lanes": dict(strct(map[string]*shape{
			"ttl": sDuration, "surfaces": sStrings, "consequences": sStrings, "workspace": sString,
		})),
		"workers":   dict(sString),
		"unpinned":  sString,
		"workspace": sString,
		"surfaces": list(strct(map[string]*shape{
			"id": sString, "tools": sStrings, "operation": sString, "consequence": sString,
			"target": strct(map[string]*shape{
				"field": sString, "canon": sString, "list": sBool, "optional": sBool, "also": sStrings,
			}),
			"sinks":             sStrings,
			"amount_field":      sString,
			"bytes_field":       sString,
			"egress_domains":    sStrings,
			"recipient_domains": sStrings,
			"memory":            sBool,
			"result_from":       sString,
			"verbs":             sStrings,
		})),
		"allow": list(strct(ruleFields)),
		"deny":  list(strct(ruleFields)),
		"preauthorizations": list(strct(map[string]*shape{
			"id": sString, "lanes": sStrings, "workers": sStrings, "tools": sStrings, "targets": sStrings,
			"expires": sTime, "per_call": sUint, "cumulative": sUint, "uses": sUint,
		})),
		"boundaries": strct(map[string]*shape{
			"protected_paths": sStrings, "egress_allow": sStrings, "trust_domains": sStrings, "crossing_classes": sStrings,
			"egress_domains": sStrings, "recipient_domains": sStrings,
			"paths": list(strct(map[string]*shape{
				"match": sString, "read_crosses": sBool, "write_crosses": sBool, "secret": sBool, "memory": sBool,
			})),
		}),
		"review": strct(map[string]*shape{"classes": sStrings, "targets": sStrings, "tools": sStrings, "surfaces": sStrings}),
		"shape_rules": list(strct(map[string]*shape{
			"id": sString, "description": sString, "surfaces": sStrings, "in": sStrings,
			"match": sString, "action": sString,
			"examples": strct(map[string]*shape{"hit": sStrings, "miss": sStrings}),
		})),
		"quotas": list(strct(map[string]*shape{
			"id": sString, "lanes": sStrings, "workers": sStrings, "per": sString, "window": sDuration,
			"requests": sUint, "amount": sUint, "bytes": sUint,
		})),
		"ledger": strct(map[string]*shape{"window": sDuration, "scope": sString}),
		"provenance": strct(map[string]*shape{
			"channels": dict(sString),
			"paths":    list(strct(levelRuleFields)),
			"tools":    list(strct(levelRuleFields)),
			"require": list(strct(map[string]*shape{
				"id": sString, "surfaces": sStrings, "consequences": sStrings, "fields": sStrings,
				"authority": sString, "approval": sBool,
				"every_arg": sBool, "except_surfaces": sStrings, "except_consequences": sStrings,
			})),
			"protected":    strct(map[string]*shape{"channels": sStrings, "paths": sStrings, "tools": sStrings}),
			"memory_paths": sStrings,
			"resources":    list(strct(levelRuleFields)),
		}),
		"routes": list(strct(map[string]*shape{
			"name": sString, "workers": sStrings, "lanes": sStrings, "max_ttl": sDuration, "consequences": sStrings, "max_records": sUint,
		})),
		"results": list(strct(map[string]*shape{
			"surface": sString, "tools": sStrings,
			"fields": list(strct(map[string]*shape{"pointer": sString, "class": sString, "authority": sString})),
		})),
	})
)

// probeVersion returns the integer value of the document's top-level
// "version" field, or 0 when it cannot tell (checkShape then reports what
// is wrong).
func probeVersion(raw []byte) int {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return 0
		}
		if kt == "version" {
			tok, err := dec.Token()
			if err != nil {
				return 0
			}
			n, ok := tok.(json.Number)
			if !ok {
				return 0
			}
			v, err := strconv.Atoi(string(n))
			if err != nil {
				return 0
			}
			return v
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return 0
		}
	}
	return 0
}

// checkShape walks the document's tokens and checks it against sh, so that
// json.Unmarshal afterwards cannot fail or guess. Lists and maps may be
// null (Canonical writes a version 1 lane without tools as "tools":null);
// scalars and structs may not.
func checkShape(raw []byte, sh *shape) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := walkShape(dec, sh, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: trailing data after the document", ErrInvalid)
	}
	return nil
}

func walkShape(dec *json.Decoder, sh *shape, field string) error {
	name := field
	if name == "" {
		name = "document"
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, name, unexpectedEOF(err))
	}
	bad := func(want string) error {
		return fmt.Errorf("%w: %s: want %s, got %s", ErrInvalid, name, want, describe(tok))
	}
	switch sh.kind {
	case kindString:
		if _, ok := tok.(string); !ok {
			return bad("a string")
		}
	case kindInt:
		n, ok := tok.(json.Number)
		if !ok {
			return bad("an integer")
		}
		if _, err := strconv.Atoi(string(n)); err != nil {
			return bad("an integer")
		}
	case kindUint:
		n, ok := tok.(json.Number)
		if !ok {
			return bad("a non-negative integer")
		}
		if _, err := strconv.ParseUint(string(n), 10, 64); err != nil {
			return bad("a non-negative integer below 2^64")
		}
	case kindBool:
		if _, ok := tok.(bool); !ok {
			return bad("true or false")
		}
	case kindDuration:
		s, ok := tok.(string)
		if !ok {
			return bad(`a duration string such as "60s"`)
		}
		if _, err := time.ParseDuration(s); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
		}
	case kindTime:
		s, ok := tok.(string)
		if !ok {
			return bad(`an RFC 3339 time string such as "2026-01-01T00:00:00Z"`)
		}
		if _, err := ParseTimestamp(s); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
		}
	case kindList:
		if tok == nil {
			return nil
		}
		if tok != json.Delim('[') {
			return bad("an array")
		}
		for i := 0; dec.More(); i++ {
			if err := walkShape(dec, sh.elem, fmt.Sprintf("%s[%d]", field, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	case kindMap, kindStruct:
		if tok == nil && sh.kind == kindMap {
			return nil
		}
		if tok != json.Delim('{') {
			return bad("an object")
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%w: %s: %v", ErrInvalid, name, unexpectedEOF(err))
			}
			k := kt.(string) // object keys are always strings
			child := k
			if field != "" {
				child = field + "." + k
			}
			if seen[k] {
				return fmt.Errorf("%w: %s: duplicate key", ErrInvalid, child)
			}
			seen[k] = true
			elem := sh.elem
			if sh.kind == kindStruct {
				var ok bool
				if elem, ok = sh.fields[k]; !ok {
					return fmt.Errorf("%w: %s: unknown field", ErrInvalid, child)
				}
			}
			if err := walkShape(dec, elem, child); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, name, unexpectedEOF(err))
	}
	return nil
}

// unexpectedEOF reports running out of input inside the document as such.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func describe(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		return string(t)
	case string:
		return strconv.Quote(t)
	}
	return fmt.Sprint(tok)
}
