import EncFSCLI

CommandLineTool.main(PackCommand.run)
