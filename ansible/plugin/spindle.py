# Placeholder for Spindle's Ansible connection plugin (the real plugin
# replaces this file). `spindle ansible install` stamps the two lines
# below with its version and its own path.
SPINDLE_VERSION = "dev"
SPINDLE_PATH = ""
