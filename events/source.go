package events

import (
	"slices"
	"strings"
)

// GroundModelMade is the Grounds line by which a source event written
// before SourceID and its companions (tags 54-57) said that part of the
// content traced to nothing registered; a source registration's answer
// still says so this way.
const GroundModelMade = "model_made"

// SourcePathPrefix prefixes the path a source was read from where an
// earlier source event (and a registration's answer) puts it in Target.
const SourcePathPrefix = "path:"

// SourceDescriptor returns what a source event (or the refusal of a
// source registration) says about the source: its id, its origins, the
// path it was read from and whether part of it is model-made. An event
// that carries SourceID keeps them in their own fields; an event written
// before those fields existed packed them as Sources[0] (the id),
// Sources[1:] (the origins), Target ("path:<path>") and Grounds (a
// "model_made" line), and is read that way, to the same values. The
// origins share e's memory.
func (e *Event) SourceDescriptor() (id string, origins []string, path string, modelMade bool) {
	if e.SourceID != "" || len(e.Sources) == 0 {
		return e.SourceID, e.Origins, e.SourcePath, e.ModelMade
	}
	id, origins = e.Sources[0], e.Sources[1:]
	if p, ok := strings.CutPrefix(e.Target, SourcePathPrefix); ok {
		path = p
	}
	return id, origins, path, slices.Contains(e.Grounds, GroundModelMade)
}
