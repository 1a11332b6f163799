module github.com/parley-voice/parley

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/coder/websocket v1.8.15 // indirect
	github.com/gordonklaus/portaudio v0.0.0-20250206071425-98a94950218b // indirect
	github.com/mattn/go-sqlite3 v1.14.53 // indirect
	github.com/ulikunitz/xz v0.5.17 // indirect
	github.com/yalue/onnxruntime_go v1.35.0 // indirect
)
