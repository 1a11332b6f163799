//go:build race

package serve

// raceDetector is true in a build with the race detector (go test -race).
const raceDetector = true
