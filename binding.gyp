{
  "variables": { "mempo_asan%": 0 },
  "targets": [
    {
      "target_name": "mempo",
      "sources": [
        "native/binding.cc",
        "native/machine.cc",
        "native/napi/args.cc",
        "native/napi/device.cc",
        "native/napi/device_buffer.cc",
        "native/napi/gather_logprobs.cc",
        "native/napi/answer_probability.cc",
        "native/napi/advantage.cc",
        "native/napi/advantage_stage.cc",
        "native/napi/ppo_loss.cc",
        "native/napi/read_bandwidth.cc",
        "native/cpu/gather_logprobs.cc",
        "native/cpu/answer_probability.cc",
        "native/cpu/advantage.cc",
        "native/cpu/ppo_loss.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=c++17", "-O3", "-fexceptions", "-pthread"],
      "ldflags": ["-pthread"],
      "conditions": [
        ["mempo_asan==1", {
          "cflags_cc": ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"],
          "ldflags": ["-fsanitize=address,undefined"]
        }]
      ],
      "xcode_settings": { "GCC_ENABLE_CPP_EXCEPTIONS": "YES", "CLANG_CXX_LANGUAGE_STANDARD": "c++17" }
    }
  ]
}
