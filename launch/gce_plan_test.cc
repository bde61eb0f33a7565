#include "launch/gce_plan.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

constexpr char kJob[] = R"(
gce:
  project: proj
  zone: us-central1-a
  job: mnist-1
  bucket: gs://bkt/
  workers: 2
  ps: 1
  machine_type: {chief: n1-standard-4, worker: n1-standard-8, ps: n1-highmem-2}
  preemptible: {worker: true}
  data_dir: gs://bkt/data
training:
  update: sync
  train_steps: 3000
)";

std::vector<std::string> Lines(const std::vector<std::vector<std::string>>& commands) {
  std::vector<std::string> lines;
  for (const auto& c : commands) lines.push_back(absl::StrJoin(c, " "));
  return lines;
}

TEST(GcePlanTest, TheClusterIsMadeOfStableInstanceNames) {
  absl::StatusOr<GcePlan> plan = ParseGcePlan(kJob, "job.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->job.cluster.chief, std::vector<std::string>{"mnist-1-chief-0:2222"});
  EXPECT_EQ(plan->job.cluster.worker,
            (std::vector<std::string>{"mnist-1-worker-0:2222", "mnist-1-worker-1:2222"}));
  EXPECT_EQ(plan->job.cluster.ps, std::vector<std::string>{"mnist-1-ps-0:2222"});
  EXPECT_EQ(plan->job.training.job_dir, "gs://bkt/mnist-1");
  EXPECT_EQ(plan->job.training.data_dir, "gs://bkt/data");
  EXPECT_EQ(plan->job.training.train_steps, 3000);
  EXPECT_EQ(plan->spec.package, "gs://bkt/pstrain_" + std::string(PSTRAIN_VERSION) + "_amd64.deb");
  EXPECT_EQ(plan->spec.tag, "mnist-1");
}

TEST(GcePlanTest, UpMakesARuleATemplateAndANamedGroupPerRoleAndDownRemovesThem) {
  GcePlan plan = *ParseGcePlan(kJob, "job.yaml");
  const std::vector<std::string> up = Lines(GceUpCommands(plan, "/s", "/tmp/c.yaml"));
  ASSERT_EQ(up.size(), 1u + 3 * 2 + 4);  // rule; per role a template and a group; 4 instances
  EXPECT_EQ(up[0],
            "compute firewall-rules create mnist-1-pstrain --project=proj --network=default "
            "--allow=tcp:2222 --source-tags=mnist-1 --target-tags=mnist-1 "
            "--description=pstrain job mnist-1: task traffic");
  EXPECT_EQ(up[1],
            "compute instance-templates create mnist-1-chief --project=proj "
            "--machine-type=n1-standard-4 --image-family=debian-12 --image-project=debian-cloud "
            "--network=default --tags=mnist-1 --scopes=cloud-platform "
            "--metadata-from-file=startup-script=/s/startup.sh,shutdown-script=/s/shutdown.sh,"
            "pstrain-cluster-config=/tmp/c.yaml "
            "--metadata=pstrain-role=chief,pstrain-job-dir=gs://bkt/mnist-1,"
            "pstrain-train-steps=3000,pstrain-package=gs://bkt/pstrain_" +
                std::string(PSTRAIN_VERSION) +
                "_amd64.deb,pstrain-group=mnist-1-chief,pstrain-data-dir=gs://bkt/data,"
                "pstrain-credentials=gs://bkt/mnist-1/credentials");
  EXPECT_EQ(up[2],
            "compute instance-groups managed create mnist-1-chief --project=proj "
            "--zone=us-central1-a --template=mnist-1-chief --size=0");
  EXPECT_EQ(up[3],
            "compute instance-groups managed create-instance mnist-1-chief --project=proj "
            "--zone=us-central1-a --instance=mnist-1-chief-0 "
            "--stateful-metadata=pstrain-task-index=0");
  // Workers are preemptible, on their machine type; the second is index 1.
  EXPECT_NE(up[4].find("--machine-type=n1-standard-8"), std::string::npos) << up[4];
  EXPECT_NE(up[4].find("--preemptible"), std::string::npos) << up[4];
  EXPECT_EQ(up[1].find("--preemptible"), std::string::npos) << up[1];
  EXPECT_NE(up[7].find("--instance=mnist-1-worker-1 --stateful-metadata=pstrain-task-index=1"),
            std::string::npos)
      << up[7];

  const std::vector<std::string> down = Lines(GceDownCommands(plan));
  for (const char* what :
       {"instance-groups managed delete mnist-1-chief",
        "instance-groups managed delete mnist-1-worker",
        "instance-groups managed delete mnist-1-ps", "instance-templates delete mnist-1-ps",
        "firewall-rules delete mnist-1-pstrain"}) {
    EXPECT_TRUE(std::any_of(down.begin(), down.end(), [&](const std::string& l) {
      return l.find(what) != std::string::npos;
    })) << what;
  }
  EXPECT_NE(GceTensorBoardHelp(plan).find("gcloud compute ssh mnist-1-chief-0"), std::string::npos);
}

TEST(GcePlanTest, BadSectionsAreNamed) {
  struct Case {
    std::string yaml;
    std::string expect;
  };
  const Case cases[] = {
      {"gce: {zone: z, job: j, bucket: gs://b}\ntraining: {train_steps: 5}\n",
       "gce.project is required"},
      {"gce: {project: p, zone: z, job: Mnist_1, bucket: gs://b}\ntraining: {train_steps: 5}\n",
       "gce.job = \"Mnist_1\""},
      {"gce: {project: p, zone: z, job: j, bucket: /tmp/b}\ntraining: {train_steps: 5}\n",
       "is not gs://bucket"},
      {"gce: {project: p, zone: z, job: j, bucket: gs://b, workrs: 2}\ntraining: {train_steps: "
       "5}\n",
       "unknown key gce.workrs (did you mean workers?)"},
      {"gce: {project: p, zone: z, job: j, bucket: gs://b, preemptible: {gpu: true}}\n"
       "training: {train_steps: 5}\n",
       "unknown key gce.preemptible.gpu"},
      {"gce: {project: p, zone: z, job: j, bucket: gs://b}\ncluster: {ps: [\"a:1\"]}\n",
       "remove this section"},
      {"gce: {project: p, zone: z, job: j, bucket: gs://b}\ntraining: {train_steps: 5, "
       "job_dir: /tmp/j}\n",
       "give gce.job_dir"},
      {"gce: {project: p, zone: z, job: j, bucket: gs://b}\ntraining: {batch_size: 5}\n",
       "training.train_steps = 0"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<GcePlan> plan = ParseGcePlan(c.yaml, "job.yaml");
    ASSERT_FALSE(plan.ok()) << c.yaml;
    EXPECT_TRUE(absl::IsInvalidArgument(plan.status()));
    EXPECT_NE(plan.status().message().find(c.expect), std::string::npos) << plan.status();
    EXPECT_EQ(plan.status().message().rfind("job.yaml", 0), 0u) << plan.status();
  }
}

}  // namespace
}  // namespace pstrain
