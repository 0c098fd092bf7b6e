import EncFSCLI

CommandLineTool.main(KeygenCommand.run)
