# Install rules: tandemd, tandem, the example configuration and the demo model (docs/deployment.md).
#
# Layout under CMAKE_INSTALL_PREFIX (default /usr/local):
#   bin/tandemd, bin/tandem
#   share/tandem/tandem.yaml                      config/tandem.yaml as it is in the repository
#   share/tandem/models/demo/demo-moe-q8_0.gguf   the demo model and its activation statistics
#   share/tandem/models/demo/hf/                  its tokenizer directory (for the SMG gateway)
# config/tandem.yaml names the demo model by the relative path models/demo/..., so it works when
# the working directory is share/tandem (the systemd unit and the Docker image set it so).
include(GNUInstallDirs)

option(TANDEM_INSTALL_DEMO_MODEL "Install the demo model (about 4 MB) with the example configuration" ON)

if(TANDEM_SERVER)
  install(TARGETS tandemd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(TARGETS tandem RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/config/tandem.yaml DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem)

if(TANDEM_INSTALL_DEMO_MODEL)
  set(tandem_demo_dir ${PROJECT_SOURCE_DIR}/models/demo)
  install(FILES ${tandem_demo_dir}/demo-moe-q8_0.gguf ${tandem_demo_dir}/activation-stats.json
          DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem/models/demo)
  # The tokenizer files only; the gateway does not need model.safetensors.
  install(FILES ${tandem_demo_dir}/hf/tokenizer.json ${tandem_demo_dir}/hf/tokenizer_config.json
                ${tandem_demo_dir}/hf/config.json ${tandem_demo_dir}/hf/generation_config.json
          DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem/models/demo/hf)
endif()
